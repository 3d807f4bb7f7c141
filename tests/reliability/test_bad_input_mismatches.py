"""Every error of the bad-input family has PyTorch's exception type (bad_input_mismatches.py measures it).

The family (bad_input_family.py) calls every public function, nn.functional function and Tensor method that
PyTorch also has with the same bad arguments on both sides, in a child process restarted past any call that
kills it. Where PyTorch raises X, ggrad must raise an X (or a subclass: ggrad's errors also inherit the
builtins). KNOWN lists, per op, the bad arguments whose outcome still differs and why: mostly ggrad's
extensions (None as "every dim", numbers where torch wants a Tensor, an int where torch wants a tuple).
"""

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bad_input_mismatches as measure  # noqa: E402

# op -> (the family's argument names whose outcome differs from torch's, why)
KNOWN = {
    "nn.functional.soft_margin_loss": (('float_index',),
                                       "torch reads the Tensor in its deprecated size_average slot as a flag "
                                       "(RuntimeError) before the int target; ggrad refuses the int target "
                                       "(TypeError)"),
    "nn.functional.multilabel_soft_margin_loss": (('float_index',), "the same"),
    "nn.functional.multi_margin_loss": (('float_index',), "the same"),
    "Tensor.add": (('float_index',),
                  "a Tensor alpha: torch's Scalar conversion gives RuntimeError, ggrad's kind check TypeError"),
    "Tensor.add_": (('float_index',),
                   "the same"),
    "Tensor.allclose": (('dim_out_of_range', 'float_dim', 'float_index', 'negative_dim_out_of_range'),
                       "ggrad takes a number as `other` (a constant), and a Tensor as rtol/atol; torch refuses both"),
    "Tensor.bernoulli": (('none_argument',),
                        "None is the default p (the input's own probabilities), an extension"),
    "Tensor.clamp": (('float_index',),
                    "a number min with a Tensor max is taken (broadcast); torch refuses the mix (TypeError)"),
    "Tensor.clamp_": (('float_index',),
                     "the same"),
    "Tensor.clip": (('float_index',),
                   "the same"),
    "Tensor.clip_": (('float_index',),
                    "the same"),
    "Tensor.isclose": (('dim_out_of_range', 'float_dim', 'float_index', 'negative_dim_out_of_range'),
                      "the same as allclose"),
    "Tensor.log_softmax": (('empty_1d', 'empty_2d', 'valid', 'zero_size_slice'),
                          "dim defaults to -1 (torch requires it); a 1-element Tensor dim reads as its int"),
    "Tensor.logaddexp": (('dim_out_of_range', 'float_dim', 'negative_dim_out_of_range'),
                        "the same as allclose"),
    "Tensor.logsumexp": (('none_argument',),
                        "None as dim means every dim, an extension"),
    "Tensor.max": (('none_argument',),
                  "None as dim means every dim, an extension"),
    "Tensor.min": (('none_argument',),
                  "the same"),
    "Tensor.nan_to_num": (('int_pair',),
                         "an int input has no NaN: ggrad returns it without reading nan=, torch parses nan= first"),
    "Tensor.nan_to_num_": (('int_pair',),
                          "the same"),
    "Tensor.permute": (('dim_out_of_range', 'negative_dim_out_of_range'),
                      "a dim out of range: ggrad IndexError (as every dim), torch's permute RuntimeError"),
    "Tensor.repeat_interleave": (('float_dim', 'int_pair'),
                                "a 2-D repeats tensor is flattened and a float repeats truncated; torch refuses both"),
    "Tensor.round": (('dim_out_of_range', 'negative_dim_out_of_range'),
                    "decimals may be positional in ggrad (keyword-only in torch)"),
    "Tensor.round_": (('dim_out_of_range', 'negative_dim_out_of_range'),
                     "the same"),
    "Tensor.softmax": (('empty_1d', 'empty_2d', 'valid', 'zero_size_slice'),
                      "the same"),
    "Tensor.squeeze": (('none_argument',),
                      "None as dim means every size-1 dim, an extension"),
    "Tensor.sub": (('float_index',),
                  "the same"),
    "Tensor.sub_": (('float_index',),
                   "the same"),
    "ggrad.add": (('float_index',),
                 "the same"),
    "ggrad.avg_pool2d": (('dim_out_of_range', 'negative_dim_out_of_range'),
                        "torch reads 5 as kernel_size and fails on the 2-D input with IndexError; ggrad checks the input's rank first"),
    "ggrad.bernoulli": (('none_argument',),
                       "None is the default p (the input's own probabilities), an extension"),
    "ggrad.broadcast_shapes": (('dim_out_of_range', 'empty_1d', 'empty_2d', 'empty_pair', 'float_dim', 'float_index', 'int_tensor', 'negative_dim_out_of_range', 'none_argument', 'valid', 'zero_size_slice'),
                              "ggrad's broadcast_shapes(a, b, op) is the internal two-shape helper, not torch's *shapes"),
    "ggrad.broadcast_to": (('dim_out_of_range', 'negative_dim_out_of_range'),
                          "the same: ggrad.broadcast_to also takes an int size"),
    "ggrad.celu": (('float_index',),
                  "torch reads the Tensor as inplace and fails on alpha's type; ggrad refuses alpha=0 first (ValueError)"),
    "ggrad.clamp": (('float_index',),
                   "the same"),
    "ggrad.clip": (('float_index',),
                  "the same"),
    "ggrad.dropout": (('dim_out_of_range', 'empty_1d', 'empty_2d', 'empty_pair', 'float_dim', 'int_pair', 'int_tensor', 'mismatched_shapes', 'negative_dim_out_of_range', 'valid', 'zero_size_slice'),
                     "torch.dropout's train argument is required; ggrad's defaults to True (as F.dropout)"),
    "ggrad.einsum": (('empty_pair', 'int_pair'),
                    "torch reads (Tensor, Tensor) as the sublist format; ggrad has no sublist format (TypeError)"),
    "ggrad.elu": (('float_index',),
                 "torch reads the 3rd Tensor as inplace=True and refuses the in-place op on a leaf; ggrad ignores inplace"),
    "ggrad.flip": (('dim_out_of_range', 'negative_dim_out_of_range'),
                  "torch.flip needs a dims tuple (TypeError for an int); ggrad also takes an int"),
    "ggrad.gelu": (('str_argument',),
                  "approximate may be positional in ggrad (keyword-only in torch): ValueError for its value"),
    "ggrad.hardsigmoid": (('empty_pair', 'mismatched_shapes'),
                         "torch reads the 2nd tensor as inplace=True and refuses an in-place op on a leaf; ggrad ignores inplace"),
    "ggrad.hardswish": (('empty_pair', 'mismatched_shapes'),
                       "the same"),
    "ggrad.allclose": (('dim_out_of_range', 'float_dim', 'float_index', 'negative_dim_out_of_range'),
                       "the same as Tensor.allclose"),
    "ggrad.isclose": (('dim_out_of_range', 'float_dim', 'float_index', 'negative_dim_out_of_range'),
                      "the same as Tensor.allclose"),
    "ggrad.layer_norm": (('dim_out_of_range', 'float_index', 'negative_dim_out_of_range'),
                        "an int normalized_shape is taken (torch's F.layer_norm refuses it): the mismatch is a ShapeError"),
    "ggrad.leaky_relu": (('float_index',),
                        "no inplace argument: a TypeError for the extra positional (torch: RuntimeError for in-place)"),
    "ggrad.log_softmax": (('empty_1d', 'empty_2d', 'valid', 'zero_size_slice'),
                         "the same"),
    "ggrad.logaddexp": (('dim_out_of_range', 'float_dim', 'negative_dim_out_of_range'),
                       "the same as allclose"),
    "ggrad.logsumexp": (('none_argument',),
                       "the same"),
    "ggrad.max": (('none_argument',),
                 "the same"),
    "ggrad.min": (('none_argument',),
                 "the same"),
    "ggrad.mish": (('empty_pair', 'mismatched_shapes'),
                  "no inplace argument: a TypeError for the extra positional"),
    "ggrad.nan_to_num": (('int_pair',),
                        "the same"),
    "ggrad.nll_loss": (('empty_pair', 'int_pair'),
                      "float or int32 targets: torch wants int64 class indices (RuntimeError); ggrad reads int32 (and floats) as indices"),
    "ggrad.one_hot": (('int_tensor',),
                     "int32 is ggrad's index dtype (GGML); torch's one_hot wants int64"),
    "ggrad.permute": (('dim_out_of_range', 'negative_dim_out_of_range'),
                     "torch.permute needs a dims tuple (TypeError for an int); ggrad also takes dims as *args"),
    "ggrad.relu6": (('empty_pair', 'mismatched_shapes'),
                   "the same"),
    "ggrad.repeat_interleave": (('dim_kw_out_of_range', 'float_dim', 'int_pair'),
                               "as Tensor.repeat_interleave; and the counts-only form given a dim: ggrad's argument "
                               "check reports the dim out of range (IndexError) before the form (torch TypeError)"),
    "ggrad.reshape": (('dim_out_of_range', 'negative_dim_out_of_range'),
                     "torch.reshape needs a shape tuple (TypeError for an int); ggrad also takes an int"),
    "ggrad.rms_norm": (('dim_out_of_range', 'float_index', 'negative_dim_out_of_range'),
                      "the same"),
    "ggrad.round": (('dim_out_of_range', 'negative_dim_out_of_range'),
                   "the same"),
    "ggrad.selu": (('dim_out_of_range', 'empty_pair', 'float_dim', 'list_of_str_argument', 'mismatched_shapes', 'negative_dim_out_of_range', 'none_argument', 'str_argument'),
                  "ggrad's selu takes inplace as its 2nd argument (ignored); torch.selu takes one"),
    "ggrad.silu": (('empty_pair', 'int_pair', 'mismatched_shapes'),
                  "the same"),
    "ggrad.softmax": (('empty_1d', 'empty_2d', 'valid', 'zero_size_slice'),
                     "the same"),
    "ggrad.squeeze": (('none_argument',),
                     "the same"),
    "ggrad.sub": (('float_index',),
                 "the same"),
    "ggrad.tile": (('dim_out_of_range', 'negative_dim_out_of_range'),
                  "the same: ggrad.tile also takes an int"),
    "ggrad.unflatten": (('float_index',),
                       "a Tensor sizes: ggrad reshapes and fails on the shape (ShapeError); torch refuses the type"),
    "nn.functional.adaptive_avg_pool1d": (('empty_pair', 'int_pair', 'list_of_str_argument', 'mismatched_shapes', 'negative_dim_out_of_range', 'str_argument'),
                                         "output_size of the wrong kind: ValueError naming it; torch TypeError/RuntimeError"),
    "nn.functional.adaptive_avg_pool2d": (('float_dim',),
                                         "a float output_size: ggrad checks the input's rank first (ShapeError)"),
    "nn.functional.adaptive_avg_pool3d": (('float_dim',),
                                         "the same"),
    "nn.functional.adaptive_max_pool3d": (('float_dim',),
                                         "the same"),
    "nn.functional.avg_pool2d": (('dim_out_of_range', 'negative_dim_out_of_range'),
                                "the same (and a negative kernel_size is refused first)"),
    "nn.functional.dropout": (('int_tensor',),
                             "dropout of an int tensor computes (torch refuses to write the float mask into ints)"),
    "nn.functional.dropout1d": (('int_tensor',),
                               "the same"),
    "nn.functional.dropout2d": (('int_tensor',),
                               "the same"),
    "nn.functional.dropout3d": (('int_tensor',),
                               "the same"),
    "nn.functional.embedding": (('float_index',),
                               "embedding(x, 0, w): torch fails on the float indices (RuntimeError), ggrad on weight=0"),
    "nn.functional.group_norm": (('float_index',),
                                "num_groups=0: torch divides by it (ZeroDivisionError), ggrad says it does not divide"),
    "nn.functional.normalize": (('str_argument',),
                                "a str p: ggrad's argument check refuses it (TypeError); torch's norm parses it "
                                "(RuntimeError)"),
    "nn.functional.max_unpool1d": (('float_index',),
                                  "a Tensor kernel_size: torch fails later on the 2-D input (IndexError)"),
    "nn.functional.rms_norm": (('dim_out_of_range', 'float_index', 'negative_dim_out_of_range'),
                              "the same"),
}


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    done, killed, total = measure.run_family(tmp_path_factory.mktemp("mismatches") / "family.jsonl")
    return measure.mismatches(done, killed), total


def test_every_error_is_of_torchs_type(found):
    mismatches, total = found
    unexpected = [f"{label}({args}): {why}" for (label, args), why in mismatches.items()
                  if args not in KNOWN.get(label, ((), ""))[0]]
    assert not unexpected, f"{len(unexpected)} of {total} calls differ from torch:\n" + "\n".join(unexpected)


def test_known_mismatches_still_differ(found):
    """An entry of KNOWN that now matches torch is removed, so the list stays the true remainder."""
    mismatches, _ = found
    fixed = [(label, args) for label, (names, _) in KNOWN.items() for args in names
             if (label, args) not in mismatches]
    assert not fixed, f"these now raise torch's type; drop them from KNOWN: {fixed}"


def test_a_mismatch_is_found_and_named():
    """The measure itself: ggrad returning where torch raised, and raising another type, are mismatches;
    a subclass of torch's type and a call torch accepts are not."""
    raised = {"kind": "raised", "types": ["IndexError", "LookupError"], "message": "out of range"}
    assert measure.mismatch({"torch": raised, "ggrad": {"kind": "ok"}}) == "torch IndexError, ggrad returned"
    other = {"kind": "raised", "types": ["ValueError", "Exception"], "message": "bad"}
    assert measure.mismatch({"torch": raised, "ggrad": other}).startswith("torch IndexError, ggrad ValueError")
    sub = {"kind": "raised", "types": ["ShapeError", "IndexError", "Exception"], "message": "x"}
    assert measure.mismatch({"torch": raised, "ggrad": sub}) == ""
    assert measure.mismatch({"torch": {"kind": "ok"}, "ggrad": other}) == ""
    killed = measure.mismatches({}, [("ggrad.x", "none", -6, "")])
    assert killed == {("ggrad.x", "none"): "the child died (exit -6)"}
