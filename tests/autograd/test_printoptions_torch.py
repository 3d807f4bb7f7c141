"""set_printoptions as PyTorch's: the same digits, notation and summarized elements (numpy's spacing aside)."""

import re

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

_NUMBER = re.compile(r"-?\d+\.\d*(?:e[+-]\d+)?|-?\d+(?:e[+-]\d+)?|\.\.\.")


@pytest.fixture(autouse=True)
def _default_options():
    yield
    ggrad.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


def _shown(lib, values):
    return _NUMBER.findall(repr(lib.tensor(values)).split("dtype")[0])


@pytest.mark.parametrize("options, values", [
    (dict(precision=2), [1.23456, 2.0, -0.5]),
    (dict(precision=6), [1.23456789, 2.5]),
    (dict(sci_mode=False), [1e-8, 1.0]),
    (dict(sci_mode=True, precision=3), [1.5, 1.0, 250.0]),
    (dict(threshold=5, edgeitems=2), np.arange(10.0)),
    (dict(profile="short"), [3.14159, 2.71828]),
    (dict(profile="full"), np.arange(1500.0)),
])
def test_the_numbers_shown_are_pytorchs(options, values):
    ggrad.set_printoptions(**options)
    torch.set_printoptions(**options)
    ours, theirs = _shown(ggrad, values), _shown(torch, values)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if b == "...":
            assert a == "..."
        else:
            assert float(a) == float(b) and ("e" in a) == ("e" in b), (ours, theirs)


def test_bad_profile_and_reset():
    with pytest.raises(ValueError, match="profile"):
        ggrad.set_printoptions(profile="tiny")
    ggrad.set_printoptions(precision=1)
    ggrad.set_printoptions(profile="default")
    assert "1.2346" in repr(ggrad.tensor([1.23456]))
