"""Autoregressive decoding: `generate` (greedy, or sampled with temperature, top-k, top-p and min-p, with or
without a repetition penalty) over a model that predicts next-token logits, with or without a KVCache; batched,
left-padded, streamed.

The model's side of the contract is `GenerationMixin`'s docstring.

With the cache every token is one compute of a decode step recorded once and replayed
(autograd/step_replay.py): the host uploads the new ids, the cache slot, the position ids, the key mask (and
for sampling one uniform per row) and reads the chosen ids back. A short prompt goes through the same step a
token at a time, a longer one is one graph (PROMPT_BY_STEPS_BYTES). The model keeps its cache and the
recorded step for its next call (`_Session`), which then records nothing if nothing else was computed. The next token is chosen in
the same graph (`choose_next`) by the rule of the host's `sample_next`, from uniforms drawn on the host from
ggrad's seeded generator (`ggrad.manual_seed`, or `generator=`), so tokens are reproducible and the same
with and without the cache (up to float rounding of near-ties).
"""

import numbers
import weakref

import numpy as np

from ..autograd import Tensor, no_grad
from ..autograd.ops.selection import where
from ..autograd.factory import generator as _stream, tensor
from ..autograd.step_replay import StepReplay
from .functional import MASKED
from .kv_cache import StepInputs


def penalize_repetition(logits, input_ids, penalty):
    """transformers' repetition penalty on the host: float32 logits (B, V) with the logit of every token in row
    b of `input_ids` (B, T) divided by `penalty` where positive, multiplied by it where negative (CTRL's rule;
    penalty > 1 makes a repeat less likely)."""
    z = np.array(logits.numpy() if isinstance(logits, Tensor) else logits, dtype=np.float32)
    rows, ids = np.arange(len(z))[:, None], np.asarray(input_ids)
    seen = z[rows, ids]
    z[rows, ids] = np.where(seen < 0, seen * np.float32(penalty), seen / np.float32(penalty))
    return z


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, min_p=None, *, repetition_penalty=None,
                input_ids=None):
    """Next token ids (B,) drawn on the host from last-position logits (B, V) (a numpy array or a Tensor).

    The logits are divided by `temperature`, then only the `top_k` largest (ties at the k-th kept), the
    smallest set of most likely tokens whose probabilities reach `top_p` (nucleus sampling; the most likely
    token is always kept, and ties of the least likely one kept), and those at least `min_p` times as likely
    as the most likely one (transformers' min-p, applied last) stay candidates. temperature=0 or top_k=1 is
    greedy (argmax, first of ties). Draws one uniform number per row from ggrad's generator. A
    `repetition_penalty` (with the sequences so far, `input_ids` (B, T)) comes first (`penalize_repetition`),
    as transformers applies it before the sampling rules.
    """
    _check_sampling(temperature, top_k, top_p, min_p, repetition_penalty)
    z = np.asarray(logits.numpy() if isinstance(logits, Tensor) else logits)
    if z.ndim != 2 or z.shape[1] == 0:
        raise ValueError(f"sample_next: logits must be (batch, vocab), got shape {z.shape}")
    if repetition_penalty is not None:
        if input_ids is None:
            raise ValueError("sample_next: repetition_penalty needs input_ids, the sequences so far")
        z = penalize_repetition(z, input_ids, repetition_penalty)
    z = z.astype(np.float64)
    if temperature == 0 or top_k == 1:
        return z.argmax(axis=-1)
    z = z / temperature
    vocab = z.shape[1]
    if top_k is not None and top_k < vocab:
        kth = np.partition(z, vocab - top_k, axis=-1)[:, vocab - top_k:vocab - top_k + 1]
        z = np.where(z < kth, -np.inf, z)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    if top_p is not None and top_p < 1.0:
        ranked = -np.sort(-p, axis=-1)
        floor = np.where(np.cumsum(ranked, axis=-1) - ranked < top_p, ranked, np.inf).min(axis=-1, keepdims=True)
        p = np.where(p >= floor, p, 0.0)
    if min_p is not None:
        p = np.where(p >= min_p * p.max(axis=-1, keepdims=True), p, 0.0)
    cdf = np.cumsum(p, axis=-1)
    u = _stream().random(len(p))[:, None] * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=-1), vocab - 1)   # first token whose cdf exceeds u


def choose_next(logits, u=None, temperature=1.0, top_k=None, top_p=None, min_p=None, repetition_penalty=None,
                seen=None):
    """`sample_next`'s rule as ops of the graph: next ids (B,) from logits (B, V) and uniforms `u` (B, 1)
    in [0, 1) (None for greedy: temperature 0 or top_k 1); `seen` int32 (B, L): the ids the
    `repetition_penalty` applies to (a fixed L: repeat an id of the row to fill it)."""
    if repetition_penalty is not None:
        hit = logits.gather(1, seen)
        penalized = where(hit < 0, hit * repetition_penalty, hit / tensor(np.float32(repetition_penalty),
                                                                         device=logits.device))
        logits = logits.scatter(1, seen, penalized)   # a repeated id writes the same value again
    if temperature == 0 or top_k == 1:
        return logits.argmax(-1)
    z = logits / temperature
    vocab = z.shape[-1]
    if top_k is not None and top_k < vocab:
        z = z.masked_fill(z < z.topk(top_k, dim=-1).values[:, -1:], float("-inf"))
    p = z.softmax(-1)
    if top_p is not None and top_p < 1.0:
        ranked = p.sort(dim=-1, descending=True).values
        floor = ranked.masked_fill(ranked.cumsum(-1) - ranked >= top_p, float("inf")).amin(-1, keepdim=True)
        p = p.masked_fill(p < floor, 0.0)
    if min_p is not None:
        p = p.masked_fill(p < p.amax(-1, keepdim=True) * min_p, 0.0)
    cdf = p.cumsum(-1)
    return (cdf <= u * cdf[:, -1:]).sum(-1).clamp(max=vocab - 1)


def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, use_cache=True, *,
             min_p=None, repetition_penalty=None, attention_mask=None, eos_token_id=None, pad_token_id=None,
             stream=False, generator=None):
    """`idx` (B, T) followed by at most `max_new_tokens` tokens, each predicted from at most `model.context`
    tokens.

    Each token is predicted from the last `model.context` tokens (longer sequences are cropped, as in
    minGPT). With `use_cache`, the prompt is run once into a KVCache and every further token is one replay
    of the decode step; once the sequence outgrows the context every cached position would move (learned
    absolute positions), so each later token re-runs the cropped window, as without the cache.

    Args:
        model: see `GenerationMixin`.
        idx (Tensor | array): int token ids (B, T), T >= 1; shorter prompts left-padded.
        max_new_tokens (int): most tokens to append.
        temperature, top_k, top_p, min_p: see `sample_next`.
        repetition_penalty (float > 0, optional): transformers' (`penalize_repetition`) over every id of
            the sequence so far, prompt and padding included, before the sampling rules (greedy too).
        use_cache (bool, default True): decode incrementally with a KVCache.
        attention_mask (Tensor | array, optional): (B, T) of 1 for tokens and 0 for the left padding, as
            transformers' `generate` takes it; position ids count the tokens only. Padding needs the cache
            and T + max_new_tokens <= model.context.
        eos_token_id (int | list of int, optional): stop tokens; a sequence ends at its first, and
            generation when every sequence has ended (the ended ones go on with `pad_token_id`).
        pad_token_id (int, optional): what ended sequences get (default: the first stop token).
        stream (bool, default False): return an iterator of the new tokens, a numpy int32 array (B,) per
            step, as they are made, instead of the whole sequences.
        generator (ggrad.Generator, optional): where sampling draws from (default: ggrad's seeded one).

    Returns:
        int32 Tensor (B, T + steps) on idx's device (the model's for host data), or the iterator.
    """
    _check_sampling(temperature, top_k, top_p, min_p, repetition_penalty)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) or max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
    device = idx.device if isinstance(idx, Tensor) else next(iter(model.parameters())).device
    ids = np.asarray(idx.numpy() if isinstance(idx, Tensor) else idx)
    if ids.ndim != 2 or ids.shape[1] == 0 or (ids.dtype.kind not in "iu"):
        raise ValueError(f"generate: idx must be integer token ids of shape (batch, T) with T >= 1, got "
                         f"{ids.dtype} of shape {ids.shape}")
    keep = _attention_mask(attention_mask, ids.shape, use_cache, max_new_tokens, model.context)
    stops = np.array([] if eos_token_id is None else np.ravel(eos_token_id), dtype=np.int64)
    pad = pad_token_id if pad_token_id is not None else int(stops[0]) if stops.size else 0
    penalty = None if repetition_penalty == 1.0 else repetition_penalty
    decoding = _Decoding(model, device, (temperature, top_k, top_p, min_p, penalty), _stream(generator))
    tokens = decoding.tokens(ids.astype(np.int32), keep, max_new_tokens, use_cache, stops, pad)
    if stream:
        return tokens
    new = list(tokens)
    return tensor(np.concatenate([ids.astype(np.int32)] + [t[:, None] for t in new], axis=1), device=device)


# model -> the _Session its last cached generate left: the next call of the same batch and rule takes it
_SESSIONS = weakref.WeakKeyDictionary()

# A prompt of T tokens goes through the decode step one token at a time (T replays, no graph of its own to
# record) while T times the bytes of the model's parameters and buffers stays within this: a replay streams
# them once (~30 MB a millisecond on one core of the project's machine), recording a prompt's graph costs
# ~5-13 ms of host time (benchmarks/README.md, issue 33). A choice by shapes alone: the same tokens each call.
PROMPT_BY_STEPS_BYTES = 64 << 20


class _Session:
    """A model's static KVCache for `batch` rows and the steps recorded on it (StepReplay): the one-token
    decode step, and the last prompt taken as one graph (a prompt of another length records it again; its
    compute buffer stays with the session, as llama.cpp's context keeps its own). Kept between generate calls
    while the batch, the rule and the model's tensors stay: a later call records nothing. The cache's
    positions from an earlier call are masked until this call writes them."""

    def __init__(self, model, tensors, device, batch, rule):
        # a weak reference: _SESSIONS holds sessions weakly keyed by their models, which they must not keep
        self.model = weakref.ref(model)
        self.device, self.batch, self.rule = device, batch, rule
        self.sampling = not (rule[0] == 0 or rule[1] == 1)
        self.penalized = rule[4] is not None
        self.nodes = _nodes(tensors)
        with no_grad():
            self.cache = model.new_kv_cache(batch, static=True)
        self.step = StepReplay(self._step, device)
        self.prompt_step = StepReplay(self._step, device)   # its own: a prompt never re-records the decode step

    def fits(self, tensors, device, batch, rule):
        """Whether a call of `batch` rows by `rule` on `device`, the model's parameters and buffers being
        `tensors`, can take this session."""
        nodes = _nodes(tensors)
        return (device == self.device and batch == self.batch and rule == self.rule
                and len(nodes) == len(self.nodes) and all(a is b for a, b in zip(nodes, self.nodes)))

    def _step(self, ids, slots, positions, mask, *extra):
        self.cache.feed(StepInputs(slots, positions, mask))
        with no_grad():
            return _choose(self, self.model()(ids, kv_cache=self.cache), extra).to(ids.dtype)


def _nodes(tensors):
    """The nodes of a model's parameters and buffers, whose memory a step recorded on them reads (None for a
    pending one)."""
    return [None if t._pending is not None else t._node for t in tensors]


def _choose(rule_owner, logits, extra):
    """choose_next on the last position's logits by `rule_owner`'s rule; `extra`: the uniforms when
    sampling, then the seen ids with a repetition penalty."""
    extra = list(extra)
    u = extra.pop(0) if rule_owner.sampling else None
    return choose_next(logits[:, -1], u, *rule_owner.rule, seen=extra.pop(0) if rule_owner.penalized else None)


class _Decoding:
    """One `generate` call: the model, how tokens are chosen, and the replayed steps."""

    def __init__(self, model, device, rule, rng):
        self.model, self.device, self.rng = model, device, rng
        temperature, top_k = rule[:2]
        self.sampling = not (temperature == 0 or top_k == 1)
        self.penalized = rule[4] is not None
        self.rule = rule   # temperature, top_k, top_p, min_p, repetition_penalty
        self.seen_len = 0   # the width of the seen ids (the longest sequence) with a repetition penalty
        self.session = None   # the model's _Session, from the prompt on
        self.key_mask = self.position = self.slot = None   # a decode step's inputs, updated in place
        self.last = None   # the ids chosen last (B,) int32, fed to the next step
        self.keep = None   # the prompt's attention mask (B, T) of bools
        self.lean = None   # _LeanStep: the decode step's inputs written where its graph reads them (False: none)
        self.window_step = StepReplay(self._window_step, device)

    def tokens(self, ids, keep, max_new_tokens, use_cache, stops, pad):
        """The new tokens (B,) of each step, ended sequences padded, until all end or max_new_tokens."""
        was_training = self.model.training
        self.model.eval()
        try:
            b, t = ids.shape
            # the sequences in one buffer, the columns still to come holding each row's first id: its first
            # seen_len columns are the ids a repetition penalty sees at every step (a fixed width)
            seq = np.repeat(ids[:, :1], t + max_new_tokens, axis=1)
            seq[:, :t] = ids
            self.keep = keep
            self.seen_len = t + max_new_tokens - 1
            finished = np.zeros(b, dtype=bool)
            stopping = stops.size > 0
            for n in range(t, t + max_new_tokens):
                nxt = self._next(seq, n, use_cache)   # int32 (B,), a fresh array
                if stopping:
                    nxt[finished] = pad
                    finished |= np.isin(nxt, stops)
                seq[:, n] = nxt
                self.last = nxt
                yield nxt
                if stopping and finished.all():
                    return
        finally:
            self.model.train(was_training)
            if self.session is not None:   # for the model's next generate
                _SESSIONS[self.model] = self.session

    def _next(self, seq, n, use_cache):
        """The next ids after the first n columns of `seq`."""
        b = seq.shape[0]
        context = self.model.context
        extra = [self.rng.random(b).astype(np.float32)[:, None]] if self.sampling else []
        if self.penalized:
            extra.append(seq[:, :self.seen_len])
        if not use_cache or n > context:   # the window slides: every position would change
            return self.window_step(seq[:, max(0, n - context):n], *extra)
        if self.session is None:
            return self._prompt(seq, n, self.keep, extra)   # n: the prompt's length
        if self.lean:
            return self.lean(self.last, n, extra)
        self.key_mask[:, 0, 0, n - 1] = 0.0   # the newest token, seen by every later one
        self.slot[0] = n - 1
        self.position += 1
        nxt = self.session.step(seq[:, n - 1:n], self.slot, self.position, self.key_mask, *extra)
        if self.lean is None and not self.penalized:   # the same step for every later token: fed in place
            self.lean = _LeanStep.of(self.session.step) or False   # False: not the host's memory, not again
        return nxt

    def _prompt(self, seq, n, keep, extra):
        """The first new ids: the prompt (n columns) into the cache of the model's session (one graph, or
        one decode step a token: PROMPT_BY_STEPS_BYTES), and what each decode step updates in place set up:
        the key mask, each row's position, the slot."""
        b = seq.shape[0]
        tensors = list(self.model.parameters()) + list(self.model.buffers())
        session = _SESSIONS.pop(self.model, None)   # taken: a generate running beside this one makes its own
        if session is None or not session.fits(tensors, self.device, b, self.rule):
            session = _Session(self.model, tensors, self.device, b, self.rule)
        self.session = session
        max_len = session.cache.max_len
        self.key_mask = np.full((b, 1, 1, max_len), MASKED, dtype=np.float32)
        self.slot = np.zeros(1, dtype=np.int32)
        if n * sum(t._node.nbytes for t in tensors) > PROMPT_BY_STEPS_BYTES:   # what a decode step reads
            slots = np.arange(n, dtype=np.int32)
            visible = keep[:, None, :] & (slots[None, None, :] <= slots[None, :, None])   # (B, n, n)
            mask = np.full((b, 1, n, max_len), MASKED, dtype=np.float32)
            mask[:, 0, :, :n][visible] = 0.0
            positions = np.maximum(np.cumsum(keep, axis=1) - 1, 0).astype(np.int32)
            self.key_mask[:, 0, 0, :n][keep] = 0.0
            self.position = positions[:, -1:].copy()
            return session.prompt_step(seq[:, :n], slots, positions, mask, *extra)
        count = np.zeros((b, 1), dtype=np.int32)
        ignored = [np.zeros_like(extra[0])] + extra[1:] if self.sampling else extra   # no draw for them
        for j in range(n):
            self.key_mask[:, 0, 0, j] = np.where(keep[:, j], 0.0, MASKED)
            count += keep[:, j:j + 1]
            self.position = np.maximum(count - 1, 0)
            self.slot[0] = j
            nxt = session.step(seq[:, j:j + 1], self.slot, self.position, self.key_mask,
                               *(extra if j == n - 1 else ignored))
        return nxt

    def _window_step(self, ids, *extra):
        with no_grad():
            return _choose(self, self.model(ids), extra).to(ids.dtype)


class _LeanStep:
    """A recorded one-token decode step (StepReplay) fed in place: each token writes the new ids, the slot,
    the positions (each row's + 1), the newest key unmasked and the uniforms through memoryviews of the
    graph's input memory and reads the chosen ids back, with no numpy call but the copy of the result.
    Between two computes of a large model the host's caches are cold (its weights streamed through them),
    and there every numpy call costs tens of microseconds (benchmarks/README.md, issue 37)."""

    def __init__(self, step, inputs, outputs):
        self.step = step
        self.ids, self.slot, self.positions, self.mask = (memoryview(v.reshape(-1)) for v in inputs[:4])
        self.uniforms = [memoryview(v.reshape(-1)) for v in inputs[4:]]
        self.rows, self.keys = inputs[3].shape[0], inputs[3].shape[-1]
        self.out = outputs[0]

    @classmethod
    def of(cls, step):
        """The lean step over StepReplay `step`'s last recording, or None where its memory is not the host's."""
        views = step.in_place()
        return None if views is None else cls(step, *views)

    def __call__(self, last, n, extra):
        """The ids (B,) after column n - 1 of the sequences, whose ids there are `last` (B,) int32."""
        self.ids[:] = memoryview(last)
        self.slot[0] = n - 1
        positions, mask, keys = self.positions, self.mask, self.keys
        for r in range(self.rows):
            positions[r] += 1
            mask[r * keys + n - 1] = 0.0   # the newest token, seen by every later one
        for view, values in zip(self.uniforms, extra):
            view[:] = memoryview(values.reshape(-1))
        self.step.replay()
        return self.out.copy()


class GenerationMixin:
    """`generate` for a Module that implements the decoding protocol (the char-GPT example, models of
    TransformerDecoder/TransformerEncoder layers or of MultiHeadAttention, GGUF LLMs):

    - `forward(ids, kv_cache=None)`: logits (B, T, V) for int32 token ids (B, T). With a `KVCache` the ids
      are the T positions after those cached: the model takes its position ids from
      `kv_cache.position_ids(T, device)` (fed ones while generate decodes: left-padded rows count their
      tokens only) and hands `kv_cache[i]` to its i-th self-attention layer (`kv_cache=` of
      MultiHeadAttention, TransformerEncoderLayer/DecoderLayer, or KVCache's docstring for one's own).
    - `context` (int): the longest sequence the model takes (the cache's length; longer ones are cropped).
    - `new_kv_cache(batch, static=False)`: an empty `KVCache` with one layer per self-attention layer, of
      `context` positions, where the model's parameters live.
    """

    def generate(self, input_ids, max_new_tokens, temperature=1.0, top_k=None, top_p=None, use_cache=True,
                 **kwargs):
        """`input_ids` (B, T) followed by at most `max_new_tokens` tokens (`ggrad.nn.generation.generate`;
        its keyword arguments: min_p, repetition_penalty, attention_mask, eos_token_id, pad_token_id,
        stream, generator)."""
        return generate(self, input_ids, max_new_tokens, temperature, top_k, top_p, use_cache, **kwargs)


def _attention_mask(mask, shape, use_cache, max_new_tokens, context):
    """The prompt's attention mask as bools (B, T); padding only where the cache can serve it."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    keep = np.asarray(mask.numpy() if isinstance(mask, Tensor) else mask)
    if keep.shape != shape or not np.isin(keep, (0, 1)).all():
        raise ValueError(f"generate: attention_mask must be 0/1 of the ids' shape {shape}, got {keep.dtype} of "
                         f"shape {keep.shape}")
    keep = keep.astype(bool)
    if not keep.all() and (not use_cache or shape[1] + max_new_tokens > context):
        raise ValueError(f"generate: a padded attention_mask needs use_cache=True and T + max_new_tokens "
                         f"({shape[1]} + {max_new_tokens}) <= the model's context {context}")
    if not keep[:, -1].all():
        raise ValueError("generate: pad on the left (attention_mask's last column must be all ones)")
    return keep


def _check_sampling(temperature, top_k, top_p, min_p=None, repetition_penalty=None):
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or not temperature >= 0:
        raise ValueError(f"generate: temperature must be a number >= 0 (0 = greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1):
        raise ValueError(f"generate: top_k must be a positive integer or None, got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, numbers.Real)
                              or not 0.0 < top_p <= 1.0):
        raise ValueError(f"generate: top_p must be in (0, 1] or None, got {top_p!r}")
    if min_p is not None and (isinstance(min_p, bool) or not isinstance(min_p, numbers.Real)
                              or not 0.0 <= min_p <= 1.0):
        raise ValueError(f"generate: min_p must be in [0, 1] or None, got {min_p!r}")
    if repetition_penalty is not None and (isinstance(repetition_penalty, bool)
                                           or not isinstance(repetition_penalty, numbers.Real)
                                           or not repetition_penalty > 0):
        raise ValueError(f"generate: repetition_penalty must be a number > 0 or None, got {repetition_penalty!r}")
