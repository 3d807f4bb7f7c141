"""SentencePiece BPE (`tokenizer.ggml.model` = "llama"): merges chosen by the score of the merged token.

As llama.cpp's SPM session (llama-vocab.cpp): the text, spaces already written as "▁", starts as one
symbol per character; every adjacent pair whose concatenation is a token is a candidate, and the
candidate of the highest score (leftmost on ties) merges first, until none is left (a priority queue).
A final symbol that is not a token is written as its UTF-8 bytes, each the byte token "<0xNN>" (or,
as llama.cpp falls back to, the one-character token of an ASCII byte); a vocabulary with neither gives
the unknown token where it has one.

Pieces whose merges cannot reach each other are tokenized separately and cached: where no token holds
"▁" after a character other than "▁", no merge crosses the start of a "▁" run, so the text is cut there.
"""

import re

from ..ggml.errors import FormatError
from .tokenizer_vocab import cached_ids, merge_pairs

SPACE = "\u2581"
_WORD_START = re.compile(f"(?<=[^{SPACE}])(?={SPACE})")


class SentencePieceBPE:
    def __init__(self, vocab):
        self.vocab = vocab
        self.token_to_id = vocab.token_to_id
        self.scores = vocab.scores
        self._byte_ids = [self._byte_token(b) for b in range(256)]
        spans_words = any(re.search(f"[^{SPACE}]{SPACE}", t) for t in vocab.tokens)
        self._cut = None if spans_words else _WORD_START
        self._cache = {}

    def _byte_token(self, b):
        i = self.token_to_id.get(f"<0x{b:02X}>")
        if i is None and b < 0x80:
            i = self.token_to_id.get(chr(b))
        return i

    def tokenize(self, text):
        """Token ids of `text` (spaces already escaped as "▁")."""
        if self._cut is None:
            return self._merge(text)
        return cached_ids(self._cut.split(text), self._cache, self._merge)

    def _merge(self, text):
        token_to_id, scores = self.token_to_id, self.scores

        def priority(left, right):   # the merged piece's score, highest first; no piece, no merge
            i = token_to_id.get(left + right)
            return None if i is None else -scores[i]

        ids = []
        for symbol in merge_pairs(text, priority):
            i = token_to_id.get(symbol)
            if i is not None:
                ids.append(i)
            else:
                ids.extend(self._bytes_of(symbol))
        return ids

    def _bytes_of(self, symbol):
        out = []
        for b in symbol.encode("utf-8", "surrogatepass"):
            i = self._byte_ids[b]
            if i is None:
                i = self.vocab.unk
                if i is None:
                    raise FormatError(f"Tokenizer: {self.vocab.source} has no token for {symbol!r}, no byte token "
                                      f"<0x{b:02X}> and no unknown token")
            out.append(i)
        return out

