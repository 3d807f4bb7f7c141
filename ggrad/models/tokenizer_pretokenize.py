"""Byte-level BPE pre-tokenizers: the regexes llama.cpp applies for each `tokenizer.ggml.pre`, on `re`.

Pre-tokenizer regexes use Unicode classes (\\p{L} letters, \\p{N} numbers, \\p{P}, \\p{S}, \\p{M}) that
Python's `re` lacks. As llama.cpp does (unicode.cpp, `unicode_regex_split`), every non-ASCII character
is first replaced by one stand-in per class (found with `unicodedata`; White_Space characters by a
vertical tab, which `\\s` matches) and each \\p{X} in the regex by its stand-in plus the ASCII members
of the class; the matches on that collapsed text give the pieces of the real text, since it keeps
every character's position. Regexes without \\p{...} run on the real text. The classes are those of
Python's Unicode tables (14.0 on Python 3.11): a character added to Unicode since is unassigned here and
so falls with the symbols, where newer tables may call it a letter.

A pre-tokenizer is a list of regexes applied in turn: each splits every piece of the one before into
its matches and the gaps between them (llama.cpp's split, and `tokenizers`' Split with "isolated").
"""

import functools
import re
import unicodedata

from ..ggml.errors import FormatError

# The Unicode White_Space property (Python's str.isspace also takes U+001C..U+001F, which it lacks)
WHITESPACE = frozenset([*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
                        0x202F, 0x205F, 0x3000])

_STAND_IN = {"N": "\ue0d1", "L": "\ue0d2", "P": "\ue0d3", "M": "\ue0d4", "S": "\ue0d5"}
_OTHER = "\ue0d0"            # control, format, private use, unassigned
_SPACE = "\x0b"


def _ascii_members(major):
    chars = [chr(c) for c in range(128) if unicodedata.category(chr(c))[0] == major]
    return "".join(re.escape(c) if not c.isalnum() else c for c in chars)


_CLASS_BODY = {k: stand_in + _ascii_members(k) for k, stand_in in _STAND_IN.items()}
_PROPERTY = re.compile(r"\\p\{(L[ultmo]?|N|P|S|M)\}")

_CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

# name -> (regexes, settings): clean_spaces (decode's space clean-up), ignore_merges (a word that is a
# token is not merged), add_bos (the default before tokenizer.ggml.add_bos_token), as llama-vocab.cpp.
_BPE_DEFAULTS = {"clean_spaces": True, "ignore_merges": False, "add_bos": False}
_FAMILIES = [
    (("default",),
     [r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"], {}),
    (("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"),
     [_LLAMA3], {"ignore_merges": True, "add_bos": True}),
    (("dbrx", "smaug-bpe"), [_LLAMA3], {}),
    (("gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
      "mpt", "olmo", "jais", "exaone4"), [_GPT2], {}),
    (("trillion", "granite-docling"), [_GPT2], {"clean_spaces": False}),
    (("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "megrez"), [_QWEN2], {}),
    (("starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"), [r"\p{N}", _GPT2], {}),
    (("command-r", "smollm"), [r"\p{N}", _GPT2], {"clean_spaces": False}),
    (("falcon",), [r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, r"[0-9][0-9][0-9]"], {}),
]
# llama-vocab.cpp turns clean-up off for these names (same regex as another name of the family)
_NO_CLEAN = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"}
PRE_TOKENIZERS = {}
for names, regexes, settings in _FAMILIES:
    for name in names:
        merged = {**_BPE_DEFAULTS, **settings}
        if name in _NO_CLEAN:
            merged["clean_spaces"] = False
        PRE_TOKENIZERS[name] = (tuple(regexes), merged)


@functools.lru_cache(maxsize=None)
def _stand_in(ch):
    """The character that stands for `ch` in the collapsed text."""
    if ch < "\x80":
        return ch
    if ord(ch) in WHITESPACE:
        return _SPACE
    return _STAND_IN.get(unicodedata.category(ch)[0], _OTHER)


def collapse(text):
    """`text` with every non-ASCII character replaced by its class's stand-in (same length)."""
    if text.isascii():
        return text
    return "".join([_stand_in(c) for c in text])


def _translate(regex):
    """The regex for collapsed text: each \\p{X} becomes its stand-in plus the ASCII members of X."""
    out, inside, i = [], False, 0
    while i < len(regex):
        m = _PROPERTY.match(regex, i)
        if m:
            body = _CLASS_BODY[m.group(1)[0]]
            out.append(body if inside else f"[{body}]")
            i = m.end()
            continue
        c = regex[i]
        if c == "\\":
            out.append(regex[i:i + 2])
            i += 2
            continue
        if c == "[" and not inside:
            inside = True
        elif c == "]" and inside:
            inside = False
        out.append(c)
        i += 1
    return "".join(out)


class PreTokenizer:
    """Splits text into the words that byte-level BPE merges within, as llama.cpp's `tokenizer.ggml.pre`."""

    def __init__(self, name):
        if name not in PRE_TOKENIZERS:
            known = ", ".join(sorted(PRE_TOKENIZERS))
            raise FormatError(f"Tokenizer: unknown pre-tokenizer tokenizer.ggml.pre = {name!r}; ggrad knows {known}")
        regexes, self.settings = PRE_TOKENIZERS[name]
        self.name = name
        # (compiled regex, whether it runs on the collapsed text); re.ASCII: \s is [ \t\n\r\f\v] only
        self._steps = [(re.compile(_translate(r), re.ASCII), True) if _PROPERTY.search(r)
                       else (re.compile(r), False) for r in regexes]

    def split(self, text):
        """The words of `text` (str pieces that concatenate to it)."""
        spans = [(0, len(text))] if text else []
        subjects = {}                   # the collapsed text, and the text with non-ASCII spaces as "\v"
        for regex, on_collapsed in self._steps:
            if on_collapsed not in subjects:
                subjects[on_collapsed] = collapse(text) if on_collapsed else _plain(text)
            spans = _split_spans(regex, subjects[on_collapsed], spans)
        return [text[a:b] for a, b in spans]


def _plain(text):
    """`text` with non-ASCII White_Space as a vertical tab, as llama.cpp gives regexes without \\p{...}."""
    if text.isascii():
        return text
    return "".join(_SPACE if c >= "\x80" and ord(c) in WHITESPACE else c for c in text)


def _split_spans(regex, subject, spans):
    """Each span of `subject` cut into its regex matches and the gaps between them."""
    out = []
    for start, end in spans:
        at = start
        for m in regex.finditer(subject, start, end):
            a, b = m.span()
            if a == b:
                continue
            if a > at:
                out.append((at, a))
            out.append((a, b))
            at = b
        if at < end:
            out.append((at, end))
    return out
