"""QLoRA: LoRA adapters fine-tuned on a quantized char-GPT (see ggrad/examples/qlora_char_gpt.py).

    python examples/qlora_char_gpt.py [--checkpoint runs/char_gpt/checkpoint.gguf] [--type q4_0] [--steps N]
"""

import sys

from ggrad.examples.qlora_char_gpt import main

if __name__ == "__main__":
    sys.exit(0 if main()["base_unchanged"] else 1)
