"""What the tests of ggrad's insertion-only GGML patches (scripts/patch_ggml_cuda.py, patch_ggml_vulkan.py) share:
loading a patch script, its refusals, and its text on a stand-in of GGML's file."""

import hashlib
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).parents[2]


def patch_script(name):
    """The module scripts/`name`.py."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_refusals(patch, first_anchor_line):
    """The insertions go only into the pinned file (its hash; .ci/run applies them to the real sdist), once."""
    with pytest.raises(patch.PatchError, match="not the pinned"):
        patch.patched(first_anchor_line)
    with pytest.raises(patch.PatchError, match="already patched"):
        patch.patched(f"// {patch.MARK}\n")


def patched_stand_in(patch, monkeypatch, source):
    """The patch's text of `source` (taken as the pinned file), checked to keep every line of it, in order."""
    monkeypatch.setattr(patch, "PINNED_SHA256", hashlib.sha256(source.encode()).hexdigest())
    out = patch.patched(source).splitlines()
    kept = iter(out)
    assert all(any(line == o for o in kept) for line in source.splitlines())   # a subsequence: nothing changed
    return "\n".join(out)
