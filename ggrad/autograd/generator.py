"""`ggrad.Generator`: a seeded source of random numbers a caller owns (PyTorch's `torch.Generator`).

Draws come from numpy's PCG64 on the host, like the global generator behind `manual_seed`; a
Generator is for code that wants its own reproducible stream (a DataLoader's shuffle order).
"""

import json
import numbers

import numpy as np


class Generator:
    """A random-number generator with its own seed; starts from a seed drawn from fresh entropy."""

    def __init__(self, device="cpu"):
        self.device = device
        self.seed()

    def manual_seed(self, seed):
        """Restart the stream from `seed` (an int); returns self, as PyTorch's."""
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"manual_seed expected an int, got {type(seed).__name__}")
        self._initial_seed = int(seed) % (1 << 64)
        self.numpy = np.random.Generator(np.random.PCG64(self._initial_seed))
        return self

    def seed(self):
        """Reseed from fresh entropy and return the new seed."""
        self.manual_seed(int(np.random.SeedSequence().generate_state(1, np.uint64)[0]))
        return self._initial_seed

    def initial_seed(self):
        """The seed the current stream started from."""
        return self._initial_seed

    def state_bytes(self):
        """The stream's whole state (seed and position) as bytes: JSON of numpy's PCG64 state."""
        return json.dumps({"initial_seed": self._initial_seed,
                           "bit_generator": self.numpy.bit_generator.state}).encode()

    def load_state_bytes(self, data):
        """Continue from a state `state_bytes` gave; ValueError for anything else."""
        try:
            state = json.loads(bytes(data).decode())
            bits = np.random.PCG64()
            bits.state = state["bit_generator"]
            seed = int(state["initial_seed"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise ValueError(f"set_rng_state: not a state of ggrad's generator ({type(e).__name__}: {e})") from e
        self._initial_seed, self.numpy = seed, np.random.Generator(bits)

    def __repr__(self):
        return f"<ggrad.Generator initial_seed={self._initial_seed}>"
