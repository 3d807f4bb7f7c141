"""Models from llama.cpp's GGUF files: `Tokenizer.from_gguf(path)`."""

from .tokenizer import Tokenizer

__all__ = ["Tokenizer"]
