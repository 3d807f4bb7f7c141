"""Validated op builders: one function per GGML op, GGML's name without the prefix, GGML's argument order."""
