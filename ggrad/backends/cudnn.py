"""`ggrad.backends.cudnn`: PyTorch's cuDNN switches, recorded (GGML does not use cuDNN)."""

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: GGML's CUDA backend has kernels of its own, not cuDNN's."""
    return False


def version() -> None:
    """None, as PyTorch's where cuDNN is not available."""
    return None
