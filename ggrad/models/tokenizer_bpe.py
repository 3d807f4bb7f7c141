"""GPT-2 byte-level BPE (`tokenizer.ggml.model` = "gpt2"): the file's merges applied by rank within words.

As llama.cpp's BPE session (llama-vocab.cpp): the pre-tokenizer cuts the text into words; each word's
UTF-8 bytes are written as GPT-2's byte characters (printable bytes as themselves, the others moved to
U+0100 and up); a word that is itself a token is kept whole where the pre-tokenizer says so
(`ignore_merges`, llama3); otherwise its characters merge, adjacent pair of the lowest merge rank
first (leftmost on ties), until no pair of the merges is left. Each word's ids are cached.
"""

from .tokenizer_pretokenize import PreTokenizer
from .tokenizer_vocab import cached_ids, merge_pairs


def _byte_characters():
    """GPT-2's bytes_to_unicode: byte -> the character that stands for it in byte-level tokens."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, moved = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + moved)
            moved += 1
    return table


BYTE_TO_CHAR = _byte_characters()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
_ENCODE = [BYTE_TO_CHAR[b] for b in range(256)]


class ByteLevelBPE:
    def __init__(self, vocab):
        self.token_to_id = vocab.token_to_id
        self.ranks = vocab.merges
        self.ignore_merges = vocab.ignore_merges
        self.pre_tokenizer = PreTokenizer("default" if vocab.pre is None else vocab.pre)
        self._cache = {}

    def tokenize(self, text):
        return cached_ids(self.pre_tokenizer.split(text), self._cache, self._word)

    def _word(self, word):
        encoded = "".join([_ENCODE[b] for b in word.encode("utf-8", "surrogatepass")])
        token_to_id = self.token_to_id
        if self.ignore_merges and encoded in token_to_id:
            return [token_to_id[encoded]]
        ids = []
        for symbol in self._merge(encoded):
            i = token_to_id.get(symbol)
            if i is not None:
                ids.append(i)
            else:                       # not in the vocabulary: its characters that are, as llama.cpp
                ids.extend(token_to_id[c] for c in symbol if c in token_to_id)
        return ids

    def _merge(self, encoded):
        ranks = self.ranks
        return merge_pairs(encoded, lambda a, b: ranks.get((a, b)))
