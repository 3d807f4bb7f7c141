"""The op declarations (ggrad/autograd/declaration.py): what a declaration makes, against PyTorch."""

import ast
import pathlib

import numpy as np
import pytest
import torch

import ggrad
from ggrad.autograd import declaration, methods
from ggrad.autograd.tensor import Tensor

OPS = pathlib.Path(ggrad.__file__).parent / "autograd" / "ops"


def test_every_module_that_declares_ops_is_imported_by_the_package():
    """An op module ops/__init__.py does not import would declare its ops after the methods were installed."""
    tree = ast.parse((OPS / "__init__.py").read_text())
    imported = {alias.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.level == 1
                and node.module is None for alias in node.names}
    declaring = {p.stem for p in OPS.glob("*.py") if p.stem != "__init__" and "declare(" in p.read_text()}
    assert declaring and declaring <= imported, sorted(declaring - imported)


def test_a_declaration_appears_as_function_method_inplace_method_and_aliases():
    d = declaration.DECLARED["atan"]
    assert d.method and d.inplace and d.aliases == ("arctan",)
    for name in ("atan", "arctan"):
        assert getattr(ggrad, name).__wrapped_op__ is d.fn
        assert methods._METHODS[name] is d.fn
        assert hasattr(Tensor, name) and hasattr(Tensor, name + "_")
    assert "view" in declaration.methods() and "view" not in declaration.functions()   # a method only
    assert not hasattr(ggrad, "view")


@pytest.mark.parametrize("name, arg", [("arctan_", ()), ("fix_", ()), ("divide_", (2.0,)), ("clip_", (-0.5, 0.5))])
def test_the_in_place_forms_of_aliases_are_pytorchs(name, arg):
    values = np.linspace(-2.0, 2.0, 7, dtype=np.float32)
    ours, theirs = ggrad.tensor(values), torch.tensor(values)
    assert getattr(ours, name)(*arg) is ours and getattr(theirs, name)(*arg) is theirs
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-7)


def test_ggrad_divide_is_torchs():
    a = np.array([1.0, -7.0, 9.0], np.float32)
    np.testing.assert_allclose(ggrad.divide(ggrad.tensor(a), 2.0, rounding_mode="floor").numpy(),
                               torch.divide(torch.tensor(a), 2.0, rounding_mode="floor").numpy())


def test_declaring_a_name_twice_is_refused():
    def exp(x):
        return x
    with pytest.raises(ValueError, match="'exp' is declared twice"):
        declaration.declare(exp, method=True)
    assert declaration.DECLARED["exp"].fn is not exp
