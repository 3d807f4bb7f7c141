"""`KVCache`: the keys and values an autoregressive decoder has computed, so a new token costs one step.

Each attention layer gets preallocated key and value buffers of shape (batch, heads, max_len, head_dim).
A step writes its new positions' keys and values into them in place (`index_write_`: GGML's set_rows
on the buffer, the cost of the new rows only) and attends over the first `length` positions, read
through the write's result so that the read comes after it in the graph.

A *static* cache (`static=True`, what `generate` uses) attends over all `max_len` positions instead, the
unfilled ones blocked by an additive mask that is uploaded data (`key_mask`), as are the write positions:
every one-token step then records the same ops on the same shapes, so the graph cache (trace_cache.py)
replays its graph each token instead of building and planning a new one. It computes attention over
`max_len` positions from the first token on: worth it where the graph building costs more than that.

A cache given step inputs (`KVCache.feed`: the write slots, the model's position ids and the additive key
mask as Tensors) takes all three from them instead of from its host-side `length`: a step recorded on them
is the same graph whatever their values, so a decode step is recorded once and replayed per token
(autograd/step_replay.py) with only new input values, and rows of a batch can hold left-padded prompts.
"""

from typing import NamedTuple

import numpy as np

from ..autograd import no_grad
from ..autograd.factory import tensor, zeros
from ..autograd.ops.inplace import index_write_
from ..ggml import f32
from ..ggml.errors import ShapeError
from .functional import MASKED


class StepInputs(NamedTuple):
    """What a step of a fed cache reads (see the module docstring): `slots` int32 (T,) cache positions
    written, `positions` int32 (B, T) the model's position ids, `mask` float32 (B, 1, T, max_len) added to
    the attention scores (0 where a query may see a key, MASKED elsewhere)."""
    slots: object
    positions: object
    mask: object


class LayerKVCache:
    """One attention layer's cache: `keys` and `values` (B, H, max_len, Dh) and the positions filled."""

    def __init__(self, batch, heads, max_len, head_dim, device=None, dtype=f32, static=False):
        self.shape = (batch, heads, max_len, head_dim)
        self.static = static
        with no_grad():   # computed with whatever is pending on the device at the first read or write
            self.keys = zeros(self.shape, dtype=dtype, device=device)
            self.values = zeros(self.shape, dtype=dtype, device=device)
        self.length = 0
        self.inputs = None   # StepInputs while fed (KVCache.feed)

    @property
    def max_len(self):
        return self.shape[2]

    def update(self, k, v):
        """Store k, v (B, H, T, Dh) at positions [length, length + T); return the cached keys and values
        of positions [0, length + T), each (B, H, length + T, Dh) (a static cache: of all max_len
        positions, those from length + T on to be blocked by `key_mask`)."""
        b, h, _, dh = self.shape
        t = k.shape[2] if k.ndim == 4 else 0
        for name, x in (("keys", k), ("values", v)):
            if x.ndim != 4 or x.shape != (b, h, t, dh):
                raise ShapeError(f"KVCache: new {name} of shape {tuple(x.shape)} should be (batch, heads, T, "
                                 f"head_dim) = {(b, h, 'T', dh)} as the cache was made")
        if self.inputs is not None:
            if self.inputs.slots.shape != (t,):
                raise ShapeError(f"KVCache: {t} new positions but {self.inputs.slots.shape[0]} slots fed")
            with no_grad():
                return (index_write_(self.keys, 2, self.inputs.slots, k),
                        index_write_(self.values, 2, self.inputs.slots, v))
        start, stop = self.length, self.length + t
        if stop > self.max_len:
            raise ValueError(f"KVCache: {t} new positions after {start} exceed the cache's max_len {self.max_len} "
                             f"(make a larger cache, or crop the sequence and start a new one)")
        positions = range(start, stop)
        with no_grad():
            keys = index_write_(self.keys, 2, positions, k)
            values = index_write_(self.values, 2, positions, v)
        self.length = stop
        if stop == self.max_len or self.static:
            return keys, values
        return keys.narrow(2, 0, stop), values.narrow(2, 0, stop)

    def key_mask(self, t, causal, device):
        """For a static cache, after `update` of t positions: the additive f32 mask (t, max_len) that
        blocks the positions not filled yet and, when `causal`, query i's keys after position
        length - t + i; None for a growing cache (its keys are the filled positions only). A fed cache's
        mask is its input's."""
        if self.inputs is not None:
            return self.inputs.mask
        if not self.static:
            return None
        length = self.length
        keys = np.arange(self.max_len)
        last = (length - t + np.arange(t))[:, None] if causal else length - 1
        return tensor(np.where(keys[None, :] > last, MASKED, 0.0).astype(np.float32), device=device)


class KVCache:
    """Per-layer key/value caches for incremental decoding (`cache[i]` goes to the i-th attention layer).

    An attention layer's side (MultiHeadAttention's with `kv_cache=`): `keys, values = cache[i].update(k, v)`
    with this step's k, v (B, H, T, Dh), then attend over them with `cache[i].key_mask(T, causal, device)`
    added to the scores where it is not None. A model's side: `nn.GenerationMixin`.

    Args:
        num_layers (int): attention layers of the model.
        batch (int): sequences decoded together.
        num_heads (int): attention heads per layer.
        max_len (int): most positions the cache holds (a longer sequence raises ValueError).
        head_dim (int): width of one head's keys and values.
        device, dtype (optional): where the buffers live and their dtype (default float32).
        static (bool, default False): attend over all max_len positions with the unfilled ones masked, so
            that every one-token step has the same shapes and replays its cached graph (see above).
    """

    def __init__(self, num_layers, batch, num_heads, max_len, head_dim, device=None, dtype=f32, static=False):
        for name, value in (("num_layers", num_layers), ("batch", batch), ("num_heads", num_heads),
                            ("max_len", max_len), ("head_dim", head_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"KVCache: {name} must be a positive integer, got {value!r}")
        self.layers = [LayerKVCache(batch, num_heads, max_len, head_dim, device, dtype, static)
                       for _ in range(num_layers)]
        self.layers[0].keys.realize()   # every layer's buffers in one compute

    def feed(self, inputs):
        """Take the write slots, position ids and key mask of the next steps from `inputs` (StepInputs of
        Tensors), or from the cache's own `length` again (None)."""
        for layer in self.layers:
            layer.inputs = inputs

    @property
    def inputs(self):
        """The StepInputs fed (None: the cache counts positions itself)."""
        return self.layers[0].inputs

    def position_ids(self, t, device=None):
        """The position ids of a forward's t new tokens: the fed ones (B, T), else the t positions after
        `length` (T,) as an int32 Tensor on `device`."""
        if self.inputs is not None:
            return self.inputs.positions
        return tensor(np.arange(self.length, self.length + t, dtype=np.int32), device=device)

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self):
        return len(self.layers)

    @property
    def length(self):
        """Positions stored (those of the first layer: a model updates every layer once per forward)."""
        return self.layers[0].length

    @property
    def max_len(self):
        return self.layers[0].max_len

    def __repr__(self):
        b, h, m, d = self.layers[0].shape
        return f"KVCache(layers={len(self)}, batch={b}, heads={h}, length={self.length}/{m}, head_dim={d})"
