"""The helpers of tests/models (hf_gguf, llama_reference) import as top-level modules."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
