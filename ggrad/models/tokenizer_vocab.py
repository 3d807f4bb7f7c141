"""The vocabulary of a llama.cpp GGUF file: its `tokenizer.ggml.*` keys, read and checked as llama.cpp does.

llama-vocab.cpp (`llama_vocab::impl::load`) is the reference: the default special ids of each model type,
`add_bos` on by default for SentencePiece vocabularies and for the llama3 pre-tokenizer, the file's keys
over those defaults, special ids outside the vocabulary ignored with a warning, and control type given
to end-of-generation tokens found by their text ("<|endoftext|>", "<|im_end|>", ...). What llama.cpp
refuses (no token list, keys of the wrong type, fewer scores or types than tokens, duplicate tokens,
add_bos without a BOS token, an unknown model) raises FormatError here.
"""

import heapq
import warnings

import numpy as np

from ..ggml.errors import FormatError
from .tokenizer_pretokenize import PRE_TOKENIZERS

# GGUF token types (gguf-py's TokenType)
UNDEFINED, NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = range(7)

KEY = "tokenizer.ggml."
_SPECIAL_KEYS = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id",
                 "pad": "padding_token_id", "eot": "eot_token_id", "eom": "eom_token_id",
                 "sep": "seperator_token_id"}
_DEFAULT_IDS = {"llama": {"bos": 1, "eos": 2, "unk": 0}, "gpt2": {"bos": 11, "eos": 11}}
_EOT_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
              "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>")
_EOG_TEXTS = _EOT_TEXTS + ("<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "</s>", "<|eom_id|>", "[EOS]", "<eos>",
                           "<turn|>", "<|tool_response>", "[e~[")


_CACHED_PIECES = 1 << 16   # pieces whose ids a tokenizer keeps (text repeats its words)


def cached_ids(pieces, cache, encode):
    """The ids of each piece of `pieces` in order, by `encode(piece)`, remembered in `cache` (up to
    _CACHED_PIECES pieces)."""
    ids = []
    for piece in pieces:
        got = cache.get(piece)
        if got is None:
            got = encode(piece)
            if len(cache) < _CACHED_PIECES:
                cache[piece] = got
        ids.extend(got)
    return ids


def merge_pairs(text, priority):
    """The symbols of `text` (its characters) after merging adjacent pairs, the lowest `priority(left, right)`
    first (None: the pair never merges) and the leftmost among equals, as llama.cpp's BPE and SentencePiece
    sessions merge: a heap of candidate merges over a linked list of symbols."""
    symbols = list(text)
    n = len(symbols)
    nxt = [*range(1, n), -1]
    prv = list(range(-1, n - 1))

    def candidate(left, right):
        """The queue entry of merging two adjacent symbols, or None where no merge joins them."""
        p = priority(symbols[left], symbols[right])
        return None if p is None else (p, left, right, symbols[left] + symbols[right])

    queue = [c for c in (candidate(k - 1, k) for k in range(1, n)) if c is not None]
    heapq.heapify(queue)
    while queue:
        _, left, right, merged = heapq.heappop(queue)
        if not symbols[left] or not symbols[right] or symbols[left] + symbols[right] != merged:
            continue                                   # outdated: a side merged since
        symbols[left], symbols[right] = merged, ""
        after = nxt[right]
        nxt[left] = after
        if after >= 0:
            prv[after] = left
        for pair in ((prv[left], left), (left, after)):
            if pair[0] >= 0 and pair[1] >= 0:
                c = candidate(*pair)
                if c is not None:
                    heapq.heappush(queue, c)
    return [s for s in symbols if s]


class Vocab:
    """What a tokenizer needs from the file. Attributes: model ("llama" or "gpt2"), pre (str or None),
    tokens (list of str), types (list of GGUF token types), scores (list of float), token_to_id (dict),
    merges ({(left, right): rank}), special ids bos/eos/unk/pad/eot/eom/sep (int or None), eog_ids
    (frozenset), add_bos, add_eos, add_space_prefix, and the pre-tokenizer's clean_spaces and ignore_merges."""

    def __init__(self, metadata, source="the GGUF metadata"):
        self.source = source
        self.model = self._string(metadata, "model", required=True)
        if self.model not in _DEFAULT_IDS:
            raise self._error(f"has tokenizer.ggml.model = {self.model!r}; ggrad tokenizes 'llama' (SentencePiece "
                              "BPE) and 'gpt2' (byte-level BPE) vocabularies")
        self.pre = self._string(metadata, "pre")
        self._read_tokens(metadata)
        n = len(self.tokens)
        self.scores = self._numbers(metadata, "scores", (np.float32, np.int32), n, 0.0)
        self.types = [t if 0 <= t <= BYTE else UNDEFINED
                      for t in self._numbers(metadata, "token_type", (np.int32,), n, NORMAL)]
        self._read_settings(metadata)
        self.merges = self._read_merges(metadata) if self.model == "gpt2" else {}
        self._read_special_ids(metadata)

    # ---- reading ---------------------------------------------------------------------------------
    def _error(self, what):
        return FormatError(f"Tokenizer: {self.source} {what}")

    def _string(self, metadata, name, required=False):
        value = metadata.get(KEY + name)
        if value is None:
            if required:
                raise self._error(f"has no {KEY + name} (not a llama.cpp model file with a vocabulary?)")
            return None
        if not isinstance(value, str):
            raise self._error(f"has {KEY + name} of type {type(value).__name__}, not a string")
        return value

    def _flag(self, metadata, name, default):
        value = metadata.get(KEY + name)
        if value is None:
            return default
        if not isinstance(value, (bool, np.bool_)):
            raise self._error(f"has {KEY + name} = {value!r}, not a bool")
        return bool(value)

    def _strings(self, metadata, name):
        value = metadata.get(KEY + name)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._error(f"has {KEY + name} of type {type(value).__name__}, not an array of strings")
        return value

    def _numbers(self, metadata, name, kinds, n, default):
        value = metadata.get(KEY + name)
        if value is None:
            return [default] * n
        if not isinstance(value, np.ndarray) or value.ndim != 1 or value.dtype not in [np.dtype(k) for k in kinds]:
            raise self._error(f"has {KEY + name} that is not an array of {' or '.join(np.dtype(k).name for k in kinds)}")
        if len(value) < n:
            raise self._error(f"has {len(value)} {KEY + name} for {n} tokens")
        return value[:n].tolist()

    def _read_tokens(self, metadata):
        tokens = self._strings(metadata, "tokens")
        if not tokens:
            raise self._error(f"has no tokens ({KEY}tokens is missing or empty)")
        self.tokens, self.token_to_id = [], {}
        for i, text in enumerate(tokens):
            if not text:
                text = f"[EMPTY_{i}]"           # as llama.cpp: an empty token cannot be matched
            if text in self.token_to_id:
                raise self._error(f"has a duplicate token {text!r} (ids {self.token_to_id[text]} and {i})")
            self.token_to_id[text] = i
            self.tokens.append(text)

    def _read_settings(self, metadata):
        spm = self.model == "llama"
        self.clean_spaces = self.ignore_merges = False
        add_bos = spm
        if not spm:
            if self.pre is None:
                warnings.warn(f"Tokenizer: {self.source} names no pre-tokenizer ({KEY}pre); using llama.cpp's "
                              "'default', which may split text unlike the model's own tokenizer", stacklevel=4)
            name = "default" if self.pre is None else self.pre
            if name not in PRE_TOKENIZERS:
                known = ", ".join(sorted(PRE_TOKENIZERS))
                raise self._error(f"has tokenizer.ggml.pre = {name!r}, a pre-tokenizer ggrad does not know ({known})")
            settings = PRE_TOKENIZERS[name][1]
            self.clean_spaces, self.ignore_merges, add_bos = (settings["clean_spaces"], settings["ignore_merges"],
                                                              settings["add_bos"])
        self.add_bos = self._flag(metadata, "add_bos_token", add_bos)
        self.add_eos = self._flag(metadata, "add_eos_token", False)
        self.add_space_prefix = self._flag(metadata, "add_space_prefix", spm)

    def _read_merges(self, metadata):
        merges = self._strings(metadata, "merges")
        if merges is None:
            raise self._error(f"is a 'gpt2' vocabulary without {KEY}merges")
        ranks = {}
        for rank, line in enumerate(merges):
            cut = line.find(" ", 1)
            if cut < 0:
                raise self._error(f"has merge {rank} = {line!r}, which is not two tokens separated by a space")
            ranks.setdefault((line[:cut], line[cut + 1:]), rank)
        return ranks

    def _read_special_ids(self, metadata):
        n = len(self.tokens)
        ids = {role: None for role in _SPECIAL_KEYS}
        ids.update({role: i for role, i in _DEFAULT_IDS[self.model].items() if i < n})
        for role, name in _SPECIAL_KEYS.items():
            value = metadata.get(KEY + name)
            if value is None:
                continue
            if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
                raise self._error(f"has {KEY + name} = {value!r}, not an integer")
            if not 0 <= int(value) < n:
                warnings.warn(f"Tokenizer: {self.source} has {KEY + name} = {int(value)} outside its {n} tokens; "
                              f"using {ids[role]} as llama.cpp does", stacklevel=4)
                continue
            ids[role] = int(value)
        for role, i in ids.items():
            setattr(self, role, i)
        for flag, role in (("add_bos", "bos"), ("add_eos", "eos")):
            if getattr(self, flag) and ids[role] is None:
                raise self._error(f"has {KEY}{flag}_token true but no {KEY}{_SPECIAL_KEYS[role]}")
        # llama.cpp finds end-of-turn / end-of-generation tokens by their text and makes them control tokens
        eog = {i for i in (self.eos, self.eot, self.eom) if i is not None}
        for text in _EOG_TEXTS:
            i = self.token_to_id.get(text)
            if i is not None:
                eog.add(i)
                if self.eot is None and text in _EOT_TEXTS:
                    self.eot = i
        for i in eog:
            if self.types[i] != CONTROL and self.tokens[i] in _EOG_TEXTS:
                self.types[i] = CONTROL
        self.eog_ids = frozenset(eog)
