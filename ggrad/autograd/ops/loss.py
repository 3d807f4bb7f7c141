"""Losses: cross_entropy (class indices or probabilities, ignore_index, label_smoothing), nll_loss,
mse_loss, l1_loss, huber_loss, smooth_l1_loss, binary_cross_entropy(_with_logits).

Cross-entropy takes LOGITS (it applies log_softmax itself), as in PyTorch.
"""

from ...ggml import f32, kernels, ops
from ...ggml.errors import ArgumentError, ShapeError
from ..autocast_hook import BANNED, FLOAT32, autocast_op
from ..dtype_rules import require_float
from ..function import Function
from ..grad_api import composite_vjp
from ..lowering import choice
from ..memory import pending_graph
from ..primitive import Primitive
from ..factory import ones
from .selection import where
from . import logical as lg
from . import unary as un
from . import views as mv
from . import neural
from . import reduce as rd
from .broadcast import broadcast_shapes, row_sums_node
from .indexing import check_labels
from ..declaration import declare

_REDUCTIONS = ("mean", "sum", "none")


def _reduce(loss, reduction):
    if reduction == "mean":
        return rd.mean(loss)
    if reduction == "sum":
        return rd.sum(loss)
    return loss


def _check_reduction(reduction, op):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _rows(input, target, op):
    """Logits as (rows, classes) and integer targets as (rows,), moving the class dim last."""
    if input.ndim == 1:
        return mv.reshape(input, 1, -1), mv.reshape(target, 1)
    if input.ndim > 2:
        moved = mv.permute(input, [0] + list(range(2, input.ndim)) + [1])
        logits = mv.reshape(moved, -1, input.shape[1])
        return logits, mv.reshape(target, -1)
    return input, target


@choice("fused_cross_entropy")
def _fused_gradient(graph):
    """Whether cross-entropy's gradient is GGML's fused cross_entropy_loss_back (not every backend has it)."""
    return True


@_fused_gradient.alternative(False)
def _composed_gradient(graph):
    return False


@choice("class_labels")
def _class_label_nodes(graph, target, classes, ignore_index):
    """(labels, valid) of ClassLabels from GGML's elementwise ops: 1 where |index - class| < 0.5, times valid."""
    c = graph.ctx
    rows = target.ne[0]
    t = ops.reshape_2d(c, ops.cast(c, target, f32), 1, rows)
    distance = ops.abs(c, ops.sub(c, ops.repeat_4d(c, t, classes, rows, 1, 1), ops.arange(c, 0, classes, 1)))
    valid = ops.step(c, ops.scale_bias(c, ops.abs(c, ops.scale_bias(c, t, 1.0, -float(ignore_index))), 1.0, -0.5))
    return ops.mul(c, ops.step(c, ops.scale_bias(c, distance, -1.0, 0.5)), valid), valid


@_class_label_nodes.alternative("kernel")
def _class_labels_by_kernel(graph, target, classes, ignore_index):
    # an ignore_index beyond int32 (PyTorch takes any int64) matches no index: -1 matches none either
    ignore = ignore_index if -2**31 <= ignore_index < 2**31 else -1
    labels = kernels.class_labels_f32(graph.ctx, target, classes, ignore)
    return labels, row_sums_node(graph, labels)


class ClassLabels(Primitive):
    """The labels of integer class indices `target` (rows,): f32 (rows, classes), 1 at each row's index and 0
    elsewhere, all 0 on rows whose index is `ignore_index`; and `valid` (rows, 1), 1 where it is not.
    One recorded op: on the CPU ggrad's kernel and a row sum, elsewhere GGML's elementwise ops
    (lowering.class_labels). Indices outside [0, classes) are check_labels' to refuse."""
    multiple_results = True

    @staticmethod
    def build(ctx, graph, target, classes, ignore_index):
        return _class_label_nodes(graph, target, classes, ignore_index)

    @staticmethod
    def shape(target, classes, ignore_index):
        return (target.shape[0], classes), (target.shape[0], 1)

    @staticmethod
    def result_dtype(target, classes, ignore_index):
        return f32, f32


class CrossEntropyRows(Function):
    """Per-row cross-entropy of logits (R, C) against soft targets (R, C), weighted per row.

    Backward: (softmax(logits) * sum(target) - target) * row_weight * g, from the logits (an input, so
    that create_graph differentiates through it); the target's (probability targets that require one):
    -log_softmax(logits) * row_weight * g.
    """

    @staticmethod
    def forward(ctx, logits, target, row_weight):
        log_probs = neural.log_softmax(logits, -1)
        per_row = -rd.SumRows.apply(target * log_probs) * row_weight
        ctx.save_for_backward(logits, target, row_weight)
        return per_row

    @staticmethod
    def backward(ctx, g):
        logits, target, row_weight = ctx.saved_tensors
        scale = g * row_weight
        target_grad = -neural.log_softmax(logits, -1) * scale if ctx.needs_input_grad[1] else None
        return (neural.softmax(logits, -1) * rd.SumRows.apply(target) - target) * scale, target_grad, None


class CrossEntropyMean(Function):
    """Mean over the R rows of -sum(labels * log_softmax(logits)), for labels whose rows sum to 1, or are all
    zero where a row is ignored (`valid` (R, 1), 0 there, masks the gradient; an input for backward only).

    The forward sums each row, then the rows, in an order fixed by the shapes: GGML's fused
    cross_entropy_loss adds per-thread partial sums, so its last bit followed the thread count. The
    backward is GGML's fused cross_entropy_loss_back, (softmax - labels) * g / R, computed row by row.
    """
    _replayable = True   # ggrad's own rule, its gradient a function of what it saves (backward_replay.py)

    @staticmethod
    def forward(ctx, logits, labels, valid):
        ctx.save_for_backward(logits, labels, valid)
        rows = logits.shape[0]
        total = rd.sum(rd.SumRows.apply(labels * neural.log_softmax(logits, -1)))
        return total * (-1.0 / rows) if rows else total   # no rows: 0, the sum of nothing

    @staticmethod
    def backward(ctx, g):
        logits, labels, valid = ctx.saved_tensors
        return CrossEntropyLossBack.apply(g, logits, labels) * valid, None, None


class CrossEntropyLossBack(Primitive):
    """GGML's cross_entropy_loss_back(g, logits, labels) = (softmax(logits) - labels) * g / rows;
    differentiated as that formula."""
    saves = "inputs"

    @staticmethod
    def build(ctx, graph, g, logits, labels):
        return ops.cross_entropy_loss_back(graph.ctx, g, logits, labels)

    @staticmethod
    def backward(ctx, gg):
        def formula(g, logits, labels):
            return (neural.softmax(logits, -1) - labels) * (g * (1.0 / logits.shape[0]))
        return composite_vjp(formula, ctx.saved_tensors, ctx.needs_input_grad, gg)

    @staticmethod
    def shape(g, logits, labels):
        return logits.shape


@declare()
@autocast_op("cross_entropy", FLOAT32)
def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Cross-entropy between logits `input` (N, C, ...) and class indices (N, ...) or probabilities."""
    _check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    require_float(input, "cross_entropy")
    classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    if target.dtype.is_float and input.ndim == 1 and target.ndim == 1:   # one unbatched row of probabilities
        loss = cross_entropy(mv.reshape(input, 1, -1), mv.reshape(target, 1, -1), weight, ignore_index, reduction,
                             label_smoothing)
        return mv.reshape(loss, ()) if reduction == "none" else loss
    if target.dtype.is_float:
        if ignore_index != -100:
            raise ArgumentError("cross_entropy: ignore_index is not supported for floating point target")
        if target.shape != input.shape:
            raise ShapeError(f"cross_entropy: probability targets of shape {target.shape} must match input "
                             f"{input.shape}")
        logits, _ = _rows(input, mv.reshape(target, -1), "cross_entropy")
        probs, _ = _rows(target, mv.reshape(target, -1), "cross_entropy")
        probs = probs * (1.0 - label_smoothing) + label_smoothing / classes
        if weight is not None:
            probs = probs * mv.reshape(weight, 1, -1)
        valid = ones((logits.shape[0], 1), device=input.device)
        count = None
    else:
        expected = (input.shape[0],) + input.shape[2:] if input.ndim > 1 else ()
        if target.shape != expected:
            raise ShapeError(f"cross_entropy: expected target of shape {expected} for input {input.shape}, "
                             f"got {target.shape}")
        check_labels(target, classes, ignore_index, "cross_entropy")
        logits, flat_target = _rows(input, target, "cross_entropy")
        onehot, valid = ClassLabels.apply(flat_target, classes, ignore_index)
        # PyTorch: (1 - s) * w[t] * nll + s/C * sum_c w[c] * (-log p_c), divided by sum of w[t]
        picked = probs = onehot if weight is None else onehot * weight
        if label_smoothing:
            spread = label_smoothing / classes
            spread = spread if weight is None else mv.reshape(weight, 1, -1) * spread
            probs = picked * (1.0 - label_smoothing) + spread
        count = rd.sum(valid if weight is None else rd.SumRows.apply(picked))
        if weight is None and reduction != "none" and _fused_gradient(pending_graph(input.device)):
            # every row of probs sums to 1, or is zero where ignored: GGML's fused gradient
            rows = logits.shape[0]
            labels = probs * valid if label_smoothing else probs
            total = CrossEntropyMean.apply(logits.to(f32), labels, valid) * float(rows)
            return total if reduction == "sum" else total / count
    per_row = CrossEntropyRows.apply(logits.to(f32), probs, valid)
    if reduction == "none":
        return mv.reshape(per_row, target.shape if not target.dtype.is_float else target.shape[:1] + target.shape[2:])
    total = rd.sum(per_row)
    if reduction == "sum":
        return total
    rows = per_row.shape[0]
    return total / count if count is not None else total * (1.0 / rows if rows else float("nan"))  # torch: nan


@declare()
@autocast_op("nll_loss", FLOAT32)
def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of log-probabilities `input` (N, C) at class indices `target` (N,)."""
    _check_reduction(reduction, "nll_loss")
    classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    check_labels(target, classes, ignore_index, "nll_loss")
    logp, flat_target = _rows(input, target, "nll_loss")
    onehot, valid = ClassLabels.apply(flat_target, classes, ignore_index)
    if weight is not None:
        valid = valid * mv.reshape(rd.sum(onehot * weight, -1), -1, 1)
    per_row = -rd.SumRows.apply(onehot * logp) * valid
    if reduction == "none":
        return mv.reshape(per_row, target.shape)
    total = rd.sum(per_row)
    return total if reduction == "sum" else total / rd.sum(valid)


def _pair_check(a, b, op):
    if a.shape != b.shape:
        broadcast_shapes(a.shape, b.shape, op)


@declare()
@autocast_op("mse_loss", FLOAT32)
def mse_loss(input, target, reduction="mean"):
    _check_reduction(reduction, "mse_loss")
    _pair_check(input, target, "mse_loss")
    d = input - target
    return _reduce(d * d, reduction)


@declare()
@autocast_op("l1_loss", FLOAT32)
def l1_loss(input, target, reduction="mean"):
    _check_reduction(reduction, "l1_loss")
    _pair_check(input, target, "l1_loss")
    return _reduce(un.abs(input - target), reduction)


@declare()
@autocast_op("huber_loss", FLOAT32)
def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    _check_reduction(reduction, "huber_loss")
    _pair_check(input, target, "huber_loss")
    require_float(input, "huber_loss")
    d = input - target
    a = un.abs(d)
    small = 1.0 - un.Step.apply(a - delta)
    loss = small * (d * d * 0.5) + (1.0 - small) * ((a - 0.5 * delta) * delta)
    return _reduce(loss, reduction)


@declare()
@autocast_op("smooth_l1_loss", FLOAT32)
def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """Huber loss divided by beta (PyTorch's smooth L1)."""
    return huber_loss(input, target, reduction, beta) * (1.0 / beta)


@declare()
@autocast_op("binary_cross_entropy_with_logits", FLOAT32)
def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """Sigmoid + binary cross-entropy in the stable form (1 - y) x + log(1 + e^-x)."""
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    _pair_check(input, target, "binary_cross_entropy_with_logits")
    log_term = un.softplus(-input)   # log(1 + e^-x): GGML's softplus is linear past 20, its gradient exact at 0
    if pos_weight is None:
        loss = (1.0 - target) * input + log_term
    else:
        loss = (1.0 - target) * input + (1.0 + (pos_weight - 1.0) * target) * log_term
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@declare()
@autocast_op("binary_cross_entropy", BANNED)
def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """-(y log p + (1-y) log(1-p)) for probabilities p, logs clamped at -100 as in PyTorch."""
    _check_reduction(reduction, "binary_cross_entropy")
    _pair_check(input, target, "binary_cross_entropy")
    require_float(input, "binary_cross_entropy")   # PyTorch has no integer kernel
    log_p = un.clamp(un.log(input), min=-100.0)
    log_q = un.clamp(un.log(1.0 - input), min=-100.0)
    loss = -(target * log_p + (1.0 - target) * log_q)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@declare()
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):  # noqa: A002
    """Kullback-Leibler divergence of `target` from log-probabilities `input`: target (log target - input)
    (0 where target is 0), or exp(t) (t - input) with `log_target`. reduction 'batchmean' divides the
    sum by the batch size (the true KL); 'mean' averages over every element, as PyTorch."""
    if size_average is not None or reduce is not None:
        raise ArgumentError("kl_div: size_average and reduce are deprecated; use reduction=")
    if reduction not in _REDUCTIONS + ("batchmean",):
        raise ValueError(f"kl_div: reduction must be one of {_REDUCTIONS + ('batchmean',)}, got {reduction!r}")
    require_float(input, "kl_div")
    if log_target:
        loss = un.exp(target) * (target - input)
    else:
        zero = lg.eq(target, 0.0)
        loss = where(zero, 0.0, target * un.log(target)) - target * input
    if reduction == "batchmean":
        return rd.sum(loss) / input.shape[0] if input.ndim else rd.sum(loss)
    return _reduce(loss, reduction)
