"""The layer rules of ../shared/DESIGN.md, checked from the import graph of the package (ast, no imports run).

ggml -> autograd -> serialization, amp, collectives -> utils, nn, optim -> train -> parallel -> distributed ->
examples (collectives: the MPI process group under torch.distributed's surface): a module may import
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
    "collectives": {"ggml", "autograd"},
    "utils": {"ggml", "autograd", "collectives"},
    "optim": {"ggml", "autograd"},
    "nn": {"ggml", "autograd", "serialization", "collectives"},
    "train": {"ggml", "autograd", "serialization", "nn", "optim", "amp", "utils", "collectives"},
    "parallel": {"ggml", "autograd", "serialization", "nn", "optim", "amp", "utils", "train", "collectives"},
    "models": {"ggml", "autograd", "serialization", "nn", "optim", "amp", "utils", "collectives"},
    "distributed": {"ggml", "autograd", "serialization", "nn", "optim", "amp", "utils", "train", "parallel",
                    "collectives"},
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


# ---- no import circles, no imports inside functions ------------------------------------------------------
MODULES = {".".join(("ggrad",) + p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
           for p in FILES}
OPTIONAL = {"mpi4py", "matplotlib", "tensorboard", "torch", "transformers", "gguf"}   # may be absent: imported late


def _for_type_checkers(tree):
    """The nodes under `if TYPE_CHECKING:` (imports a type checker reads and Python never runs)."""
    return {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)}


def _module_of(name):
    """The ggrad module `name` names (`import ggrad.nn.functional`), or the package it is in."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else None


def imported_modules(source, module):
    """The ggrad modules that `module` (its source) imports, wherever in it, but for type checkers only."""
    tree = ast.parse(source)
    skip = _for_type_checkers(tree)
    package = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {_module_of(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) if node.level else ""
            stem = ".".join(p for p in (base, node.module or "") if p)
            if stem in MODULES:   # else not a ggrad source (the compiled binding, another package)
                found |= {f"{stem}.{a.name}" if f"{stem}.{a.name}" in MODULES else stem for a in node.names}
    return {m for m in found if m is not None and m != module}


def circles(graph):
    """The strongly connected components of more than one module of `graph` (module -> modules it imports)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.add(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles():
    graph = {m: imported_modules(p.read_text(), m) for m, p in MODULES.items()}
    assert circles(graph) == []


def test_a_circle_is_seen():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_an_import_inside_a_function_draws_its_arrow():
    source = "def f():\n    from .tensor import Tensor\n"
    assert "ggrad.autograd.tensor" in imported_modules(source, "ggrad.autograd.engine")
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .tensor import Tensor\n"
    assert imported_modules(typing_only, "ggrad.autograd.engine") == set()


def late_imports(source):
    """Imports inside functions, but those of a dependency that may be absent (OPTIONAL)."""
    late = []
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = ["." * node.level + (node.module or "")]
                else:
                    continue
                late += [f"line {node.lineno}: {n}" for n in names if n.split(".")[0] not in OPTIONAL]
    return late


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_imports_at_the_top(path):
    assert late_imports(path.read_text()) == [], f"{path.relative_to(ROOT)} imports inside a function"


def test_a_late_import_is_seen():
    assert late_imports("def f():\n    from . import execution\n") == ["line 2: ."]
    assert late_imports("def f():\n    import mpi4py\n") == []
