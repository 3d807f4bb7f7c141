"""`ggrad.random`: PyTorch's torch.random: the default generator's seed and state, and `fork_rng`."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from .autograd.factory import get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed", "set_rng_state"]


@contextlib.contextmanager
def fork_rng(devices: Any = None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kw: str = "devices", device_type: str = "cuda") -> Iterator[None]:
    """Draws inside the block leave the generator as it was before it (its state is restored on exit). One
    generator serves every device in ggrad, so `devices` and `device_type` change nothing."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
