"""`ggrad.backends` (PyTorch's torch.backends): the switches training scripts set, accepted under PyTorch's names.

GGML picks its kernels and their precision itself: there is no cuDNN (`cudnn.is_available()` is False), no
TF32 switch and no choice of attention kernels to hand to it. So `cudnn.benchmark`, `cudnn.deterministic`,
`cuda.matmul.allow_tf32` and the `enable_*_sdp` flags are recorded and read back, as PyTorch's are, and change
no result. `cuda.is_built()` and `mps.is_available()` say what the installed GGML offers.
"""

from . import cpu, cuda, cudnn, mps, openmp

__all__ = ["cpu", "cuda", "cudnn", "mps", "openmp"]
