"""`ggrad.backends.openmp`: whether GGML's CPU backend runs its threads with OpenMP."""

from .. import ggml


def is_available() -> bool:
    return bool(ggml.build_info().get("openmp"))
