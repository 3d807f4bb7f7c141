"""The argument-kind table (autograd/arguments.py): read after a call fails, it gives PyTorch's error."""

import pytest

import ggrad
from ggrad.autograd import arguments
from ggrad.autograd.arguments import ArgumentTypeError, NotATensorError, explain

torch = pytest.importorskip("torch")


def _raised(fn):
    try:
        fn()
    except Exception as e:   # noqa: BLE001  (the type is what is compared)
        return e
    return None


@pytest.mark.parametrize("call", [
    lambda m: m.add(m.ones(2, 3), "abc"),
    lambda m: m.ones(2, 3).sum("abc"),
    lambda m: m.ones(2, 3).sum(5),
    lambda m: m.tril(m.ones(2, 3), m.ones(2)),
    lambda m: m.bmm(m.ones(2, 3), None),
    lambda m: m.ones(2, 3).reshape(),
    lambda m: m.ones(2, 3).clamp_("abc"),
    lambda m: m.cat(m.ones(2, 3)),
    lambda m: m.ones(2, 3).logical_and(5),
], ids=["operand-str", "dim-str", "dim-range", "int-tensor", "tensor-none", "missing-shape", "inplace-str",
        "cat-tensor", "logical-number"])
def test_a_bad_argument_raises_torchs_type(call):
    theirs, ours = _raised(lambda: call(torch)), _raised(lambda: call(ggrad))
    assert theirs is not None and isinstance(ours, type(theirs)), (theirs, ours)


def test_the_message_names_the_op_the_argument_and_its_position():
    with pytest.raises(ArgumentTypeError, match=r"^add\(\): argument 'other' \(position 2\) must be Tensor or "
                                                r"Number, not str$"):
        ggrad.add(ggrad.ones(2), "abc")
    with pytest.raises(NotATensorError, match=r"^bmm\(\): argument 'mat2' \(position 2\) must be Tensor, "
                                              r"not NoneType$"):
        ggrad.bmm(ggrad.ones(2, 2, 2), None)
    with pytest.raises(ArgumentTypeError, match=r"^sum\(\): argument 'dim' \(position 1\)"):   # self not counted
        ggrad.ones(2).sum("abc")
    with pytest.raises(IndexError, match=r"sum\(\): Dimension out of range \(expected to be in range of "
                                         r"\[-2, 1\], but got 5\)"):
        ggrad.ones(2, 3).sum(5)


def test_kinds_accept_what_torch_accepts():
    assert arguments.OPERAND.fits(2.5) and arguments.OPERAND.fits(ggrad.ones(2))
    assert not arguments.OPERAND.fits("2.5") and not arguments.OPERAND.fits(None)
    assert arguments.DIMS.fits(1) and arguments.DIMS.fits((0, -1)) and not arguments.DIMS.fits(ggrad.ones(0))
    assert arguments.INT.fits(ggrad.tensor(3)) and not arguments.INT.fits(ggrad.ones(3)) and \
        not arguments.INT.fits(1.5)
    assert arguments.SHAPE.fits([2, 3]) and not arguments.SHAPE.fits(["a"])
    assert arguments.DTYPE.fits(ggrad.float16) and arguments.DTYPE.fits("float32") and \
        not arguments.DTYPE.fits("bogus")


def test_per_op_kinds_override_the_name():
    sig = arguments._signature(ggrad.autograd.ops.max)
    assert arguments.kind_of("max", sig.parameters["dim"]).fits(ggrad.ones(2))   # max(input, other)
    assert not arguments.kind_of("sum", sig.parameters["dim"]).fits(ggrad.ones(2))


def test_fitting_arguments_leave_the_ops_own_error():
    """explain says nothing when every argument is of its kind: the op's error (here a shape) stands."""
    a, b = ggrad.ones(2, 3), ggrad.ones(4)
    assert explain(ggrad.autograd.ops.add, "add", (a, b), {}) is None
    with pytest.raises(RuntimeError, match="add"):
        ggrad.add(a, b).numpy()


def test_an_unparsable_call_is_left_alone():
    assert explain(ggrad.autograd.ops.add, "add", (), {"nonsense": 1}) is None
    assert explain(print, "print", (1,), {}) is None
