"""The layer rules of ../shared/DESIGN.md, checked from the import graph of the package (ast, no imports run).

ggml -> autograd -> serialization, amp, utils -> nn, optim -> train -> parallel -> examples: a module may import
only its own layer and the layers below it; optim and nn do not import each other; outside ggrad.ggml
nothing names the compiled binding (`ggrad.ggml._lib`, `_ffi`, `ggml.lib`, `ggml.ffi`).
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "ggrad"

BELOW = {
    "ggml": set(),
    "autograd": {"ggml"},
    "serialization": {"ggml", "autograd"},
    "amp": {"ggml", "autograd"},
    "utils": {"ggml", "autograd"},
    "optim": {"ggml", "autograd"},
    "nn": {"ggml", "autograd", "serialization"},
    "train": {"ggml", "autograd", "serialization", "nn", "optim", "amp", "utils"},
    "parallel": {"ggml", "autograd", "serialization", "nn", "optim", "amp", "utils", "train"},
    "models": {"ggml", "autograd", "serialization", "nn", "optim", "amp", "utils"},
    "distributed": {"ggml", "autograd", "serialization", "nn", "optim", "amp", "utils", "train", "parallel"},
}
FILES = sorted(ROOT.rglob("*.py"))


def _layer(rel):
    """The layer of a module (path relative to ggrad/): its package, or its own name at the top level."""
    return pathlib.PurePath(rel).with_suffix("").parts[0]


def _imports(source, rel):
    """(line, absolute ggrad module name) of every import in the source of ggrad/<rel>."""
    parts = ["ggrad"] + list(pathlib.PurePath(rel).with_suffix("").parts)
    package = parts if parts[-1] == "__init__" else parts[:-1]
    package = package[:-1] if package[-1] == "__init__" else package
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # `from . import nn` imports the module nn; `from .x import y` imports from x
            found += [(node.lineno, f"{stem}.{a.name}" if not node.module else stem) for a in node.names]
    return [(line, name) for line, name in found if name.startswith("ggrad.")]


def layer_violations(source, rel):
    """The imports of ggrad/<rel> that point up or sideways across layers."""
    layer = _layer(rel)
    if layer not in BELOW:
        return []   # the package root, examples and entry points may import anything
    bad = []
    for line, name in _imports(source, rel):
        target = name.split(".")[1]
        if target != layer and target not in BELOW[layer] and (target in BELOW or target == "examples"):
            bad.append(f"line {line}: {name}")
    return bad


def binding_violations(source, rel):
    """Places outside ggrad.ggml that reach the compiled binding directly."""
    if _layer(rel) == "ggml":
        return []
    bad = [f"line {line}: {name}" for line, name in _imports(source, rel) if name.startswith("ggrad.ggml._")]
    bad += [f"line {node.lineno}: ggml.{node.attr}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr in ("lib", "ffi")
            and isinstance(node.value, ast.Name) and node.value.id == "ggml"]
    return bad


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_imports_point_down(path):
    rel = path.relative_to(ROOT)
    assert layer_violations(path.read_text(), rel) == [], f"{rel} imports across layers"


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_binding_stays_behind_ggrad_ggml(path):
    rel = path.relative_to(ROOT)
    assert binding_violations(path.read_text(), rel) == [], f"{rel} reaches the compiled binding"


@pytest.mark.parametrize("source, rel", [
    ("from ..optim import SGD\n", "nn/fake.py"),
    ("def f():\n    from .. import train\n", "nn/fake.py"),
    ("import ggrad.nn\n", "autograd/fake.py"),
    ("from ...nn.module import Module\n", "autograd/ops/fake.py"),
    ("from ..parallel import dp_train\n", "train/fake.py"),
    ("from . import nn\n", "serialization.py"),
    ("from .nn.module import Module\n", "serialization.py"),
])
def test_an_upward_import_is_seen(source, rel):
    assert layer_violations(source, rel)


def test_a_downward_import_passes():
    assert layer_violations("from ..autograd import Tensor\nfrom . import module\n", "nn/fake.py") == []


def test_raw_binding_use_is_seen():
    assert binding_violations("from .. import ggml\nx = ggml.lib.ggml_nbytes\n", "autograd/fake.py")
    assert binding_violations("from ..ggml._lib import lib\n", "nn/fake.py")
