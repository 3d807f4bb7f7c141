"""The public API's type hints (issue 15): they resolve, they cover the chosen surface, and the stub of
Tensor's installed methods (ggrad/autograd/tensor_methods.pyi) matches the functions installed.

mypy is not needed here (a type checker is no dependency); tests/typing/pytorch_style_snippet.py is the code
to check by hand: `mypy tests/typing/pytorch_style_snippet.py` from the repository root.
"""

import ast
import importlib.util
import inspect
import pathlib
import sys
import types
import typing

import pytest

import ggrad
import ggrad.nn.functional as F
from ggrad.autograd import factory, grad_mode, methods
from ggrad.autograd.tensor import Tensor
from ggrad.nn.module import Module
from ggrad.optim import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop
from ggrad.utils import data

ROOT = pathlib.Path(ggrad.__file__).resolve().parent
STUB = ROOT / "autograd" / "tensor_methods.pyi"


def _public_functions(module):
    """The functions a module defines itself (not imported) whose names do not start with _."""
    return [f for name, f in vars(module).items() if inspect.isfunction(f) and not name.startswith("_")
            and f.__module__ == module.__name__]


def _own_methods(cls, dunders=()):
    """The methods (and property getters) its class body defines (not those installed by setattr): the public ones and the named dunders."""
    out = []
    for name, v in vars(cls).items():
        if name.startswith("_") and name not in dunders:
            continue
        if isinstance(v, property):
            v = v.fget
        if inspect.isfunction(v) and v.__qualname__.startswith(cls.__name__ + "."):   # not installed later
            out.append(v)
    return out


# The annotated surface, module by module: every callable listed must be fully annotated.
COVERED = {
    "ggrad.autograd.factory": _public_functions(factory),
    "ggrad.autograd.grad_mode": _public_functions(grad_mode) + [
        m for cls in (grad_mode.set_grad_enabled, grad_mode._Switch, grad_mode.inference_mode)
        for m in _own_methods(cls, ("__init__", "__enter__", "__exit__", "__call__"))],
    "ggrad.autograd.tensor.Tensor": _own_methods(Tensor, (
        "__float__", "__int__", "__index__", "__bool__", "__len__", "__iter__", "__array__", "__repr__",
        "__hash__")),
    "ggrad.nn.module.Module": _own_methods(Module, ("__init__", "__call__", "__setattr__", "__getattr__",
                                                    "__delattr__", "__repr__")),
    "ggrad.nn.functional": [F.rms_norm, F.embedding, F.scaled_dot_product_attention],
    "ggrad.optim": [Optimizer.__init__, Optimizer.add_param_group, Optimizer.zero_grad, Optimizer.step,
                    Optimizer.state_dict, Optimizer.load_state_dict] + [
        cls.__init__ for cls in (SGD, Adam, AdamW, RMSprop, Adagrad)],
    "ggrad.utils.data": [data.Dataset.__getitem__, data.Dataset.__add__, data.IterableDataset.__iter__,
                         data.TensorDataset.__init__, data.TensorDataset.__getitem__, data.Subset.__init__,
                         data.ConcatDataset.__init__, data.random_split, data.default_collate,
                         data.DataLoader.__init__, data.DataLoader.__iter__],
    "ggrad (top level)": [ggrad.save, ggrad.load, ggrad.stats, ggrad.reset_stats, ggrad.is_tensor, ggrad.numel,
                          ggrad.set_graph_cache, ggrad.is_floating_point],
}
CALLABLES = [pytest.param(f, id=f"{where}:{f.__qualname__}") for where, fs in COVERED.items() for f in fs]


def test_the_covered_set_is_not_empty():
    for where, fs in COVERED.items():
        assert fs, where
    assert len(CALLABLES) > 80


def _unresolved(hint):
    """The ForwardRefs left inside a resolved hint (a name that did not resolve)."""
    if isinstance(hint, typing.ForwardRef):
        return [hint]
    return [r for arg in typing.get_args(hint) for r in _unresolved(arg)]


@pytest.mark.parametrize("fn", CALLABLES)
def test_hints_resolve(fn):
    """get_type_hints evaluates every annotation string: a hint naming something undefined raises here."""
    hints = typing.get_type_hints(fn)
    assert not [r for h in hints.values() for r in _unresolved(h)]


@pytest.mark.parametrize("fn", CALLABLES)
def test_fully_annotated(fn):
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    missing = [p.name for p in params if p.annotation is inspect.Parameter.empty]
    assert not missing, f"{fn.__qualname__}: parameters without a hint: {missing}"
    assert sig.return_annotation is not inspect.Signature.empty, f"{fn.__qualname__}: no return hint"


def test_unannotated_callable_is_caught():
    """The check above fails on a function missing one hint (so it can fail)."""
    def half(x: int, y) -> int:
        return x
    with pytest.raises(AssertionError):
        test_fully_annotated(half)


def test_a_typo_in_a_hint_is_caught():
    ns = {}
    exec("from __future__ import annotations\ndef f(x: Tensr) -> None: ...", ns)
    with pytest.raises(NameError):
        typing.get_type_hints(ns["f"])


# ---- the stub of the methods methods.py installs --------------------------------------------------
def _stub_defs():
    """(method name, ast.FunctionDef) of every def in the stub's TensorMethods class, overloads included."""
    tree = ast.parse(STUB.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TensorMethods")
    return [(d.name, d) for d in cls.body if isinstance(d, ast.FunctionDef)]


def _stub_module():
    """The stub executed as a module of ggrad.autograd (its relative imports resolve; nothing else runs)."""
    module = types.ModuleType("ggrad.autograd._tensor_methods_stub")
    module.__package__ = "ggrad.autograd"
    exec(compile(STUB.read_text(), str(STUB), "exec"), module.__dict__)
    return module


def _installed(name):
    """The function methods.py installs as `name`; for an in-place wrapper, the op it wraps."""
    fn = methods._METHODS[name]
    if isinstance(fn, property):
        return None
    closure = inspect.getclosurevars(fn).nonlocals
    if fn.__code__ is methods._inplace(lambda x: x, "probe").__code__:
        return closure["fn"]
    return fn


def test_stub_declares_exactly_the_installed_methods():
    assert {name for name, _ in _stub_defs()} == set(methods._METHODS)


def test_stub_signatures_match_the_installed_functions():
    """Each stub parameter exists in the installed function with the same kind (a keyword-only one may go to
    **kwargs, an extra positional one to *args) and the same literal default; required parameters appear."""
    problems = []
    for name, d in _stub_defs():
        fn = _installed(name)
        if fn is None:
            continue
        runtime = list(inspect.signature(fn).parameters.values())[1:]   # the tensor itself is `self`
        by_name = {p.name: p for p in runtime}
        has_args = any(p.kind is p.VAR_POSITIONAL for p in runtime)
        has_kwargs = any(p.kind is p.VAR_KEYWORD for p in runtime)
        a = d.args
        overloaded = any(isinstance(dec, ast.Name) and dec.id == "overload" for dec in d.decorator_list)
        positional = a.args[1:]
        defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
        runtime_positional = [p.name for p in runtime if p.kind is p.POSITIONAL_OR_KEYWORD]
        if [p.arg for p in positional] != runtime_positional[:len(positional)]:
            problems.append(f"{name}: positional {[p.arg for p in positional]} vs {runtime_positional}")
        stub_params = [(p.arg, "pos", dflt) for p, dflt in zip(positional, defaults[1:])]
        stub_params += [(p.arg, "kw", dflt) for p, dflt in zip(a.kwonlyargs, a.kw_defaults)]
        if a.vararg is not None and not has_args and a.vararg.arg not in by_name:
            problems.append(f"{name}: *{a.vararg.arg} but the installed function takes no *args")
        for arg, kind, dflt in stub_params:
            p = by_name.get(arg)
            if p is None:
                if not (kind == "kw" and has_kwargs):
                    problems.append(f"{name}: parameter {arg} is not the installed function's")
                continue
            if kind == "kw" and p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
                problems.append(f"{name}: {arg} is keyword-only in the stub, {p.kind} installed")
            if isinstance(dflt, ast.Constant) and dflt.value is not Ellipsis and dflt.value != p.default:
                problems.append(f"{name}: {arg} defaults to {dflt.value!r} in the stub, {p.default!r} installed")
            if dflt is None and p.default is not p.empty and kind == "pos" and not overloaded:   # an overload
                # may require what the function leaves optional (max(dim) returns (values, indices))
                problems.append(f"{name}: {arg} is required in the stub, optional installed")
        declared = {arg for arg, _, _ in stub_params} | ({a.vararg.arg} if a.vararg else set())
        required = [p.name for p in runtime if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                                                   p.KEYWORD_ONLY)]
        if [r for r in required if r not in declared]:
            problems.append(f"{name}: required {required} not all declared")
    assert not problems, "\n".join(problems)


def test_stub_hints_resolve():
    module = _stub_module()
    cls = module.TensorMethods
    for name, _ in _stub_defs():
        member = vars(cls)[name]
        fn = member.fget if isinstance(member, property) else member
        for variant in typing.get_overloads(fn) or [fn] if sys.version_info >= (3, 11) else [fn]:
            hints = typing.get_type_hints(variant, vars(module))
            assert not [r for h in hints.values() for r in _unresolved(h)], name


def test_tensor_inherits_the_stub_for_type_checkers_only():
    assert Tensor.__bases__ == (object,)
    assert importlib.util.find_spec("ggrad.autograd.tensor_methods") is None   # a stub, never imported


def test_package_ships_its_hints():
    assert (ROOT / "py.typed").is_file()
    pyproject = (ROOT.parent / "pyproject.toml").read_text()
    assert '"py.typed"' in pyproject and '"**/*.pyi"' in pyproject


def test_the_snippet_runs():
    """The PyTorch-style code that mypy reads by hand also runs (it trains a little net)."""
    spec = importlib.util.spec_from_file_location(
        "pytorch_style_snippet", pathlib.Path(__file__).parent / "typing" / "pytorch_style_snippet.py")
    snippet = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(snippet)
    assert snippet.main() > 0.0


def _stub_generator():
    spec = importlib.util.spec_from_file_location("generate_stubs", ROOT.parent / "scripts" / "generate_stubs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stubs_follow_the_declarations():
    """Both stubs are what scripts/generate_stubs.py makes from the op declarations (run it after adding an op)."""
    gen = _stub_generator()
    assert gen.ops_stub() == gen.OPS_STUB.read_text()
    assert gen.methods_stub(gen.METHODS_STUB.read_text()) == gen.METHODS_STUB.read_text()


def test_a_new_method_gets_an_entry_and_a_gone_one_loses_it():
    gen = _stub_generator()
    text = gen.METHODS_STUB.read_text()
    without_exp = "\n".join(line for line in text.split("\n") if not line.startswith("    def exp("))
    regenerated = gen.methods_stub(without_exp + "    def no_such_method(self) -> Tensor: ...\n")
    assert "    def exp(self) -> Tensor: ..." in regenerated and "no_such_method" not in regenerated


def test_the_functional_stub_reexports_every_op():
    tree = ast.parse((ROOT / "autograd" / "ops" / "__init__.pyi").read_text())
    names = {alias.asname for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert names == set(ggrad.autograd.ops.__all__) and {"exp", "arctan", "cat", "concat", "gt"} <= names
