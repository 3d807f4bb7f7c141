"""`ggrad.backends.mps`: whether Apple's GPU is there, through GGML's Metal backend."""

from .. import ggml


def is_built() -> bool:
    return ggml.has_backend("Metal") or ggml.has_backend("MTL")


def is_available() -> bool:
    return any(d.type in ("metal", "mtl") for d in ggml.devices())
