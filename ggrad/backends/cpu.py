"""`ggrad.backends.cpu`: the vector extensions GGML's CPU backend was built for."""

from .. import ggml


def get_cpu_capability() -> str:
    """"AVX512", "AVX2" or "DEFAULT": the widest vector extension GGML's CPU backend uses, in PyTorch's words."""
    features = ggml.build_info().get("cpu_features", {})
    for name in ("AVX512", "AVX2"):
        if features.get(name) == "1":
            return name
    return "DEFAULT"
