"""Insertion-only patches of the pinned GGML's sources (patch_ggml_cuda.py, patch_ggml_vulkan.py).

Each insertion is a block of ggrad's own text placed before an anchor line (the first line starting with the
anchor text, searched from the line after another anchor where one is given): none of GGML's lines is
written here or changed there. The file's hash is checked first, so another GGML is refused rather than
patched blindly, and a file carrying the patch's mark is refused too.
"""

import hashlib
import pathlib
import sys


class PatchError(Exception):
    """The file is not the pinned GGML's, or an anchor is missing."""


def _line_starting(lines, text, start):
    for i in range(start, len(lines)):
        if lines[i].lstrip().startswith(text):
            return i
    raise PatchError(f"anchor not found: {text!r}")


def apply(source, mark, pinned_sha256, target, insertions):
    """`source` with `insertions`, each (text, the line it goes before, the line after which that anchor is
    searched for, or None), after checking its hash against `pinned_sha256` and that `mark` is absent."""
    if mark in source:
        raise PatchError("already patched")
    digest = hashlib.sha256(source.encode()).hexdigest()
    if digest != pinned_sha256:
        raise PatchError(f"{target} is not the pinned GGML's (sha256 {digest})")
    lines = source.splitlines(keepends=True)
    places = []
    for text, anchor, after in insertions:
        start = 0 if after is None else _line_starting(lines, after, 0) + 1
        places.append((_line_starting(lines, anchor, start), text))
    for index, text in sorted(places, reverse=True):   # from the bottom up: earlier line numbers stay valid
        lines.insert(index, text)
    return "".join(lines)


def main(argv, patched, target, what, usage):
    """Patch GGML_SOURCE_DIR/`target` in place with `patched` (the command line of a patch script)."""
    if len(argv) != 2:
        sys.exit(usage)
    path = pathlib.Path(argv[1]) / target
    try:
        path.write_text(patched(path.read_text()))
    except (OSError, PatchError) as e:
        sys.exit(f"{pathlib.Path(argv[0]).name}: {path}: {e}")
    print(f"{pathlib.Path(argv[0]).name}: {path}: {what} inserted")
