"""`Tokenizer`: text to token ids and back with the vocabulary inside a llama.cpp GGUF file.

Behaviour follows llama.cpp's `llama_tokenize` / `llama_detokenize` (llama-vocab.cpp):
  - special tokens first: the text is cut at every occurrence of a user-defined token's text, and, with
    `parse_special=True`, of a control or unknown token's (longest tokens first); those parts become
    their tokens, the rest is tokenized;
  - "llama" vocabularies (SentencePiece BPE, `tokenizer_spm`): a space is put before text that starts
    the input or follows a special token (`tokenizer.ggml.add_space_prefix`, on by default), spaces
    become "▁", bytes without a token fall back to "<0xNN>";
  - "gpt2" vocabularies (byte-level BPE, `tokenizer_bpe`): the pre-tokenizer of `tokenizer.ggml.pre`;
  - `add_bos=True` is llama.cpp's `add_special`: BOS only where the file says the model takes one
    (`tokenizer.ggml.add_bos_token`, else llama.cpp's default: on for "llama" vocabularies and the llama3
    pre-tokenizer, off for the others, e.g. Qwen2), EOS likewise where `add_eos_token` is set;
  - decoding: "▁" back to spaces and byte tokens to their bytes (SentencePiece), byte characters to
    bytes (byte-level), control tokens as their text unless skipped, then llama.cpp's space clean-up
    where the pre-tokenizer asks for it (" ," -> ",", " 's" -> "'s", ...).
"""

import os
import re
from typing import Any, Iterable, List, Mapping, Optional

from ..ggml import gguf
from ..ggml.errors import FormatError
from .tokenizer_bpe import CHAR_TO_BYTE, ByteLevelBPE
from .tokenizer_spm import SPACE, SentencePieceBPE
from .tokenizer_vocab import BYTE, CONTROL, NORMAL, UNKNOWN, USER_DEFINED, Vocab


_BEFORE_MARK = re.compile(rb" (?=[?!.,])")
_BEFORE_CONTRACTION = re.compile(rb" (?='(?:s|m|re|ve))")


class Tokenizer:
    """The tokenizer of a GGUF model file (`Tokenizer.from_gguf(path)`).

    Attributes: bos_token_id, eos_token_id, unk_token_id, pad_token_id, eot_token_id (int or None),
    eog_token_ids (frozenset: the ids that end generation, as llama.cpp finds them), add_bos_token,
    add_eos_token (what `add_bos=True` adds), model ("llama" or "gpt2"), pre (the pre-tokenizer's name).
    """

    def __init__(self, vocab: Vocab):
        self._vocab = vocab
        self.model, self.pre = vocab.model, vocab.pre
        self.bos_token_id, self.eos_token_id = vocab.bos, vocab.eos
        self.unk_token_id, self.pad_token_id, self.eot_token_id = vocab.unk, vocab.pad, vocab.eot
        self.eog_token_ids = vocab.eog_ids
        self.add_bos_token, self.add_eos_token = vocab.add_bos, vocab.add_eos
        self._spm = vocab.model == "llama"
        self._session = SentencePieceBPE(vocab) if self._spm else ByteLevelBPE(vocab)
        self._pieces = [self._piece(i) for i in range(len(vocab.tokens))]
        specials = [i for i, t in enumerate(vocab.types) if t in (CONTROL, USER_DEFINED, UNKNOWN)]
        specials.sort(key=lambda i: -len(vocab.tokens[i]))          # longest first, as llama.cpp
        self._specials = [(vocab.tokens[i], i, vocab.types[i] == USER_DEFINED) for i in specials]

    @classmethod
    def from_gguf(cls, path: "str | os.PathLike[str]") -> "Tokenizer":
        """The tokenizer of the GGUF file at `path` (its `tokenizer.ggml.*` metadata; tensors are not read).

        Raises FormatError (a ValueError) for a file that is not GGUF, has no vocabulary, an unknown
        `tokenizer.ggml.model` or `tokenizer.ggml.pre`, or a damaged vocabulary.
        """
        return cls.from_metadata(gguf.read(path).metadata, source=os.fspath(path))

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any], source: str = "the GGUF metadata") -> "Tokenizer":
        """The tokenizer of GGUF metadata already read (a dict as `ggrad.ggml.gguf.read(path).metadata`)."""
        return cls(Vocab(metadata, source))

    def __len__(self) -> int:
        return len(self._vocab.tokens)

    def __repr__(self) -> str:
        return (f"Tokenizer(model={self.model!r}, pre={self.pre!r}, vocab_size={len(self)}, "
                f"bos_token_id={self.bos_token_id}, eos_token_id={self.eos_token_id}, "
                f"add_bos_token={self.add_bos_token})")

    # ---- vocabulary ------------------------------------------------------------------------------
    def id_to_token(self, token_id: int) -> str:
        """The text of token `token_id` as the file stores it (e.g. "▁the", "Ġthe", "<0x0A>")."""
        return self._vocab.tokens[self._check_id(token_id)]

    def token_to_id(self, text: str) -> Optional[int]:
        """The id of the token whose stored text is `text`, or None."""
        return self._vocab.token_to_id.get(text)

    def _check_id(self, token_id):
        if not isinstance(token_id, int) and not hasattr(token_id, "__index__"):
            raise TypeError(f"Tokenizer: token ids must be integers, got {type(token_id).__name__}")
        token_id = int(token_id)
        if not 0 <= token_id < len(self):
            raise IndexError(f"Tokenizer: token id {token_id} is outside the vocabulary (0..{len(self) - 1})")
        return token_id

    # ---- encoding --------------------------------------------------------------------------------
    def encode(self, text: str, add_bos: bool = True, parse_special: bool = False) -> List[int]:
        """Token ids of `text`, as llama.cpp's `llama_tokenize(text, add_special=add_bos, parse_special)`.

        Args:
            text (str): the text.
            add_bos (bool): add the BOS token (and EOS) where the file's metadata says the model takes
                them (`add_bos_token`, `add_eos_token`); a file whose model takes none gets none.
            parse_special (bool): also turn the text of control tokens ("<|im_start|>", "</s>", ...)
                into those tokens. Off by default, as in llama.cpp's `common_tokenize`, so that text
                from users or files cannot inject control tokens; user-defined tokens are always parsed.
        """
        if not isinstance(text, str):
            raise TypeError(f"Tokenizer.encode: text must be a str, got {type(text).__name__}")
        vocab = self._vocab
        ids = [vocab.bos] if add_bos and vocab.add_bos else []
        after_special = True
        for part in self._split_special(text, parse_special):
            if isinstance(part, int):
                ids.append(part)
                after_special = True
                continue
            if self._spm:
                if vocab.add_space_prefix and after_special:
                    part = " " + part
                part = part.replace(" ", SPACE)
            ids.extend(self._session.tokenize(part))
            after_special = False
        if add_bos and vocab.add_eos:
            ids.append(vocab.eos)
        return ids

    def _split_special(self, text, parse_special):
        """`text` cut at the special tokens' texts: a list of str (to tokenize) and int (token ids)."""
        parts = [text] if text else []
        for token, token_id, user_defined in self._specials:
            if not (parse_special or user_defined):
                continue
            if not any(isinstance(p, str) and token in p for p in parts):
                continue
            cut = []
            for p in parts:
                if isinstance(p, int) or token not in p:
                    cut.append(p)
                    continue
                for k, piece in enumerate(p.split(token)):
                    if k:
                        cut.append(token_id)
                    if piece:
                        cut.append(piece)
            parts = cut
        return parts

    # ---- decoding --------------------------------------------------------------------------------
    def _piece(self, i):
        """(bytes of token i, whether only special rendering shows it), as llama.cpp's token_to_piece."""
        vocab = self._vocab
        kind, text = vocab.types[i], vocab.tokens[i]
        raw = text.encode("utf-8", "surrogatepass")
        if kind in (CONTROL, UNKNOWN):
            return raw, True
        if kind == USER_DEFINED:
            return raw, False
        if kind == BYTE:
            if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
                try:
                    return bytes([int(text[3:5], 16)]), False
                except ValueError:
                    pass
            raise FormatError(f"Tokenizer: {vocab.source} has byte token {i} = {text!r}, not of the form <0xNN>")
        if kind != NORMAL:                  # unused and undefined types render as nothing, as in llama.cpp
            return b"", False
        if self._spm:
            return text.replace(SPACE, " ").encode("utf-8", "surrogatepass"), False
        out = bytearray()
        for c in text:
            b = CHAR_TO_BYTE.get(c)
            if b is None:                   # not a byte character: llama.cpp writes this marker
                out += f"[UNK_BYTE_0x{c.encode('utf-8', 'surrogatepass').hex()}{text}]".encode("utf-8", "surrogatepass")
            else:
                out.append(b)
        return bytes(out), False

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """The text of token ids (a list, or a 1-D Tensor or numpy array), as llama.cpp's `llama_detokenize`.

        Control and unknown tokens (BOS, EOS, "<|im_end|>", ...) are written as their text, or left
        out with `skip_special_tokens=True`. For "llama" vocabularies the leading space that encoding
        put before the text is removed (llama.cpp keeps it after a leading BOS; ggrad removes it there
        too, as transformers does, so that `decode(encode(s)) == s`). Invalid UTF-8 (a sequence cut in
        the middle of a character) becomes U+FFFD.
        """
        if hasattr(ids, "tolist"):                  # a Tensor or numpy array of ids
            ids = ids.tolist()
            if isinstance(ids, int) or (ids and isinstance(ids[0], list)):
                raise TypeError("Tokenizer.decode: ids must be one sequence of ids (a 1-D tensor or array); "
                                "decode the rows of a batch one by one")
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            raise TypeError(f"Tokenizer.decode: ids must be a sequence of ints, got {type(ids).__name__}")
        out = bytearray()
        strip = self._spm and self._vocab.add_space_prefix
        for token_id in ids:
            raw, special = self._pieces[self._check_id(token_id)]
            if special and skip_special_tokens:
                continue
            if strip and raw:
                if raw[:1] == b" ":
                    raw = raw[1:]
                strip = False
            out += raw
        if self._vocab.clean_spaces:
            out = _clean_spaces(out)
        return out.decode("utf-8", "replace")


def _clean_spaces(text):
    """llama.cpp's three clean-up passes over the decoded bytes (its in-place loops, as substitutions)."""
    text = _BEFORE_MARK.sub(b"", bytes(text))          # " ?", " !", " .", " ,": the space goes
    text = text.replace(b" ' ", b"'")                 # " ' ": both spaces go
    return _BEFORE_CONTRACTION.sub(b"", text)          # " 's", " 'm", " 're", " 've" (" 't", " 'd", " 'll" stay)
