"""Bad calls to the op builders raise Python exceptions naming the op; none reaches a GGML_ASSERT.

Without the validation nearly every case below would abort the interpreter inside GGML, so they all
run in ONE subprocess that must survive them and print ALIVE. A last test shows that an abort that
still happens (a raw `lib` call) is reported by ggrad's abort hook.
"""

import resource
import subprocess
import sys
import textwrap

import pytest

SCRIPT = r'''
import numpy as np
import ggrad.ggml as gg
from ggrad.ggml import ops, lib
from ggrad.ggml.errors import ShapeError, DTypeError, GGMLError

ctx = gg.Context(n_tensors=512)
T = lambda *ne, t="f32": ctx.new_tensor(t, ne)
a, b = T(4, 3), T(5, 2)
m34, m45 = T(4, 3), T(4, 5)
v3 = T(3)
i3 = T(3, t="i32")
x = T(8, 4, 3)
closed = gg.Context(n_tensors=4)
dead = closed.new_tensor("f32", (4, 3))
closed.close()
full = gg.Context(n_tensors=2)
f1 = full.new_tensor("f32", (2,))
f2 = full.new_tensor("f32", (2,))
CASES = [
    ("add: b not broadcastable", ShapeError, "add", lambda: ops.add(ctx, a, b)),
    ("add: b is a numpy array", DTypeError, "add", lambda: ops.add(ctx, a, np.ones((3, 4)))),
    ("add: b is None", DTypeError, "add", lambda: ops.add(ctx, a, None)),
    ("add: i32 + f32", DTypeError, "add", lambda: ops.add(ctx, T(4, 3, t="i32"), a)),
    ("add: tensor of a closed Context", GGMLError, "add", lambda: ops.add(ctx, dead, a)),
    ("add: closed ctx", GGMLError, "add", lambda: ops.add(closed, a, a)),
    ("add: full context", GGMLError, "add", lambda: [ops.add(full, f1, f2) for _ in range(100)]),
    ("add: ctx is not a Context", DTypeError, "add", lambda: ops.add("ctx", a, a)),
    ("mul_mat: inner dims differ", ShapeError, "mul_mat", lambda: ops.mul_mat(ctx, a, b)),
    ("mul_mat: batch not broadcastable", ShapeError, "mul_mat", lambda: ops.mul_mat(ctx, T(4, 3, 2), T(4, 5, 3))),
    ("mul_mat: empty batch (SIGFPE in C)", ShapeError, "mul_mat", lambda: ops.mul_mat(ctx, T(4, 3, 0), T(4, 5, 3))),
    ("mul_mat: a transposed", ShapeError, "mul_mat", lambda: ops.mul_mat(ctx, ops.transpose(ctx, T(3, 4)), m45)),
    ("mul_mat: b transposed", ShapeError, "mul_mat", lambda: ops.mul_mat(ctx, m34, ops.transpose(ctx, T(5, 4)))),
    ("mul_mat: i32 weights", DTypeError, "mul_mat", lambda: ops.mul_mat(ctx, T(4, 3, t="i32"), m45)),
    ("out_prod: rows differ", ShapeError, "out_prod", lambda: ops.out_prod(ctx, a, b)),
    ("reshape_2d: element count", ShapeError, "reshape_2d", lambda: ops.reshape_2d(ctx, a, 5, 2)),
    ("reshape_2d: non-contiguous", ShapeError, "reshape_2d", lambda: ops.reshape_2d(ctx, ops.transpose(ctx, a), 12, 1)),
    ("reshape_2d: negative dim", ValueError, "reshape_2d", lambda: ops.reshape_2d(ctx, a, -12, -1)),
    ("view_1d: past the end", ShapeError, "view_1d", lambda: ops.view_1d(ctx, a, 10, 16)),
    ("view_2d: strides past the end", ShapeError, "view_2d", lambda: ops.view_2d(ctx, a, 4, 3, 32, 0)),
    ("view_1d: negative offset", ValueError, "view_1d", lambda: ops.view_1d(ctx, a, 1, -4)),
    ("permute: repeated axis", ShapeError, "permute", lambda: ops.permute(ctx, a, 0, 0, 1, 2)),
    ("permute: axis 4", ShapeError, "permute", lambda: ops.permute(ctx, a, 1, 2, 3, 4)),
    ("get_rows: f32 indices", DTypeError, "get_rows", lambda: ops.get_rows(ctx, a, v3)),
    ("get_rows: batch mismatch", ShapeError, "get_rows", lambda: ops.get_rows(ctx, x, T(2, 5, t="i32"))),
    ("get_rows_back: gradient rows != indices", ShapeError, "get_rows_back", lambda: ops.get_rows_back(ctx, m45, i3, a)),
    ("set_rows: f32 indices", DTypeError, "set_rows", lambda: ops.set_rows(ctx, m45, m34, v3)),
    ("concat: dims differ", ShapeError, "concat", lambda: ops.concat(ctx, a, b, 1)),
    ("concat: types differ", DTypeError, "concat", lambda: ops.concat(ctx, a, T(4, 3, t="f16"), 0)),
    ("concat: dim 5", ValueError, "concat", lambda: ops.concat(ctx, a, a, 5)),
    ("repeat: not a multiple", ShapeError, "repeat", lambda: ops.repeat(ctx, T(3, 2), T(4, 4))),
    ("repeat_back: not a multiple", ShapeError, "repeat_back", lambda: ops.repeat_back(ctx, T(4, 4), T(3, 2))),
    ("soft_max_ext: mask row length", ShapeError, "soft_max_ext", lambda: ops.soft_max_ext(ctx, a, T(5, 3), 1.0, 0.0)),
    ("soft_max_ext: mask too few rows", ShapeError, "soft_max_ext", lambda: ops.soft_max_ext(ctx, a, T(4, 2), 1.0, 0.0)),
    ("soft_max_ext: i32 mask", DTypeError, "soft_max_ext", lambda: ops.soft_max_ext(ctx, a, T(4, 3, t="i32"), 1.0, 0.0)),
    ("soft_max_ext: ALiBi without mask", ValueError, "soft_max_ext", lambda: ops.soft_max_ext(ctx, a, None, 1.0, 8.0)),
    ("soft_max: non-contiguous", ShapeError, "soft_max", lambda: ops.soft_max(ctx, ops.transpose(ctx, a))),
    ("soft_max_ext_back: ALiBi on the CPU", ValueError, "soft_max_ext_back", lambda: ops.soft_max_ext_back(ctx, a, a, 1.0, 1.0)),
    ("norm: f16 input", DTypeError, "norm", lambda: ops.norm(ctx, T(4, 3, t="f16"), 1e-5)),
    ("rms_norm: negative eps", ValueError, "rms_norm", lambda: ops.rms_norm(ctx, a, -1.0)),
    ("rms_norm_back: shapes differ", ShapeError, "rms_norm_back", lambda: ops.rms_norm_back(ctx, a, b, 1e-5)),
    ("group_norm: zero groups (division by zero)", ValueError, "group_norm", lambda: ops.group_norm(ctx, x, 0, 1e-5)),
    ("rope_ext: unknown mode", ValueError, "rope_ext", lambda: ops.rope_ext(ctx, x, i3, None, 8, "sideways", 0, 1e4, 1, 0, 1, 0, 0)),
    ("rope_ext: positions per token", ShapeError, "rope_ext", lambda: ops.rope_ext(ctx, x, T(4, t="i32"), None, 8, "neox", 0, 1e4, 1, 0, 1, 0, 0)),
    ("rope_ext: n_dims > head size", ValueError, "rope_ext", lambda: ops.rope_ext(ctx, x, i3, None, 16, 0, 0, 1e4, 1, 0, 1, 0, 0)),
    ("rope_multi: sections all zero", ShapeError, "rope_multi", lambda: ops.rope_multi(ctx, x, T(12, t="i32"), None, 8, [0, 0, 0, 0], "mrope", 0, 1e4, 1, 0, 1, 0, 0)),
    ("flash_attn_ext: f32 mask", DTypeError, "flash_attn_ext", lambda: ops.flash_attn_ext(ctx, T(8, 3, 2), T(8, 5, 2), T(8, 5, 2), T(5, 3), 1.0, 0.0, 0.0)),
    ("flash_attn_ext: heads", ShapeError, "flash_attn_ext", lambda: ops.flash_attn_ext(ctx, T(8, 3, 3), T(8, 5, 2), T(8, 5, 2), None, 1.0, 0.0, 0.0)),
    ("flash_attn_back: unimplemented in GGML", GGMLError, "flash_attn_back", lambda: ops.flash_attn_back(ctx, x, x, x, x, False)),
    ("cross_entropy_loss_back: header order", ShapeError, "cross_entropy_loss_back", lambda: ops.cross_entropy_loss_back(ctx, a, a, T(1))),
    ("pool_2d: unknown op", ValueError, "pool_2d", lambda: ops.pool_2d(ctx, x, "median", 2, 2, 2, 2, 0, 0)),
    ("pool_2d: kernel larger than input", ShapeError, "pool_2d", lambda: ops.pool_2d(ctx, x, "max", 9, 9, 1, 1, 0, 0)),
    ("pool_2d_back: wrong gradient shape", ShapeError, "pool_2d_back", lambda: ops.pool_2d_back(ctx, x, x, "avg", 2, 2, 2, 2, 0, 0)),
    ("im2col: zero stride (division by zero)", ValueError, "im2col", lambda: ops.im2col(ctx, T(3, 3, 4), x, 0, 1, 0, 0, 1, 1, True, "f16")),
    ("im2col_back: wrong gradient shape", ShapeError, "im2col_back", lambda: ops.im2col_back(ctx, x, T(3, 3, 3), [8, 4, 3, 1], 1, 1, 0, 0, 1, 1, True)),
    ("conv_2d: channels differ", ShapeError, "conv_2d", lambda: ops.conv_2d(ctx, T(3, 3, 2, 5), x, 1, 1, 0, 0, 1, 1)),
    ("conv_2d_dw: f32 kernel the CPU cannot multiply", DTypeError, "conv_2d_dw", lambda: ops.conv_2d_dw(ctx, T(3, 3, 1, 3), x, 1, 1, 1, 1, 1, 1)),
    ("conv_transpose_1d: padding", ValueError, "conv_transpose_1d", lambda: ops.conv_transpose_1d(ctx, T(3, 2, 4), T(5, 4), 1, 1, 1)),
    ("argsort: unknown order", ValueError, "argsort", lambda: ops.argsort(ctx, a, "sideways")),
    ("argmax: 3-D input", ShapeError, "argmax", lambda: ops.argmax(ctx, x)),
    ("top_k: k > row length", ShapeError, "top_k", lambda: ops.top_k(ctx, a, 9)),
    ("count_equal: f32", DTypeError, "count_equal", lambda: ops.count_equal(ctx, a, a)),
    ("cast: unknown dtype", DTypeError, "cast", lambda: ops.cast(ctx, a, "f8")),
    ("cast: i32 to f16", DTypeError, "cast", lambda: ops.cast(ctx, T(4, 3, t="i32"), "f16")),
    ("cast: q4_0 with rows not a block multiple", ShapeError, "cast", lambda: ops.cast(ctx, a, "q4_0")),
    ("cast: transposed q4_0 blocks", ShapeError, "cast", lambda: ops.cast(ctx, ops.transpose(ctx, T(64, 3, t="q4_0")), "f32")),
    ("cont: transposed q4_0 blocks", ShapeError, "cont", lambda: ops.cont(ctx, ops.transpose(ctx, T(64, 3, t="q4_0")))),
    ("cpy: element counts differ", ShapeError, "cpy", lambda: ops.cpy(ctx, a, b)),
    ("acc: view past the end", ShapeError, "acc", lambda: ops.acc(ctx, a, T(3, 3), 16, 48, 48, 16)),
    ("set_1d: past the end", ShapeError, "set_1d", lambda: ops.set_1d(ctx, a, v3, 40)),
    ("scale: non-contiguous", ShapeError, "scale", lambda: ops.scale(ctx, ops.transpose(ctx, a), 2.0)),
    ("pad: negative padding", ValueError, "pad", lambda: ops.pad(ctx, a, -1, 0, 0, 0)),
    ("roll: shift >= size", ValueError, "roll", lambda: ops.roll(ctx, a, 4, 0, 0, 0)),
    ("pad_reflect_1d: padding >= size", ValueError, "pad_reflect_1d", lambda: ops.pad_reflect_1d(ctx, a, 4, 0)),
    ("glu: odd row length", ShapeError, "swiglu", lambda: ops.swiglu(ctx, T(5, 3))),
    ("glu_split: shapes differ", ShapeError, "glu_split", lambda: ops.glu_split(ctx, a, b, "swiglu")),
    ("add_cast: f32 a", DTypeError, "add_cast", lambda: ops.add_cast(ctx, a, a, "f16")),
    ("tri: not square", ShapeError, "tri", lambda: ops.tri(ctx, a, "lower")),
    ("solve_tri: unsupported variant", ValueError, "solve_tri", lambda: ops.solve_tri(ctx, T(3, 3), T(2, 3), True, False, False)),
    ("interpolate: antialias with nearest", ValueError, "interpolate", lambda: ops.interpolate(ctx, a, 8, 6, 1, 1, "nearest|antialias")),
    ("upscale: factor 1", ValueError, "upscale", lambda: ops.upscale(ctx, a, 1, "nearest")),
    ("arange: stop <= start", ValueError, "arange", lambda: ops.arange(ctx, 3.0, 1.0, 1.0)),
    ("opt_step_adamw: not a parameter", ValueError, "opt_step_adamw", lambda: ops.opt_step_adamw(ctx, a, a, a, a, T(7))),
    ("opt_step_sgd: 3 hyper-parameters", ShapeError, "opt_step_sgd", lambda: (a.set_param(), ops.opt_step_sgd(ctx, a, a, T(3)))),
    ("win_part: window 0 (division by zero)", ValueError, "win_part", lambda: ops.win_part(ctx, x, 0)),
    ("ssm_conv: channels differ", ShapeError, "ssm_conv", lambda: ops.ssm_conv(ctx, T(8, 4, 2), T(4, 5))),
    ("map_custom1: fun not callable", DTypeError, "map_custom1", lambda: ops.map_custom1(ctx, a, 42, 1)),
    ("map_custom1: n_tasks 0", ValueError, "map_custom1", lambda: ops.map_custom1(ctx, a, print, 0)),
    ("custom_4d: n_args disagrees", ValueError, "custom_4d", lambda: ops.custom_4d(ctx, "f32", 2, 1, 1, 1, [a], 2, print, 1)),
    ("unary: unknown op", ValueError, "unary", lambda: ops.unary(ctx, a, "cube")),
    ("mul_mat_id: ids not i32", DTypeError, "mul_mat_id", lambda: ops.mul_mat_id(ctx, T(4, 3, 2), T(4, 1, 5), T(2, 5))),
    ("set_param: not a leaf", ShapeError, "set_param", lambda: ops.scale(ctx, a, 2.0).set_param()),
    ("set_loss: not a scalar", ShapeError, "set_loss", lambda: a.set_loss()),
    ("set_loss: not f32", ShapeError, "set_loss", lambda: T(1, t="i32").set_loss()),
    ("set_prec: not a mul_mat", ShapeError, "set_prec", lambda: ops.scale(ctx, a, 2.0).set_prec("f32")),
]
for label, expected, op, call in CASES:
    try:
        call()
    except BaseException as exc:
        ok = isinstance(exc, expected) and str(exc).startswith(op + ":")
        print(f"CASE\t{int(ok)}\t{label}\t{type(exc).__name__}\t{exc}", flush=True)
    else:
        print(f"CASE\t0\t{label}\tno exception\t", flush=True)
print("ALIVE", len(CASES), flush=True)
'''


@pytest.fixture(scope="module")
def bad_calls():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    return proc


def test_every_bad_call_raises_and_the_process_survives(bad_calls):
    out = bad_calls.stdout
    assert bad_calls.returncode == 0, f"the interpreter died (rc={bad_calls.returncode}):\n{bad_calls.stderr[-3000:]}"
    assert "GGML aborted" not in bad_calls.stderr
    lines = [line.split("\t") for line in out.splitlines() if line.startswith("CASE")]
    alive = [line for line in out.splitlines() if line.startswith("ALIVE")]
    assert alive, out[-2000:]
    n = int(alive[0].split()[1])
    assert n >= 30 and len(lines) == n
    failed = [f"{label}: {kind}: {msg}" for _, ok, label, kind, msg in lines if ok != "1"]
    assert not failed, "\n".join(failed)


def test_messages_name_the_shapes(bad_calls):
    text = bad_calls.stdout
    assert "mul_mat: a ne=[4, 3, 1, 1] and b ne=[5, 2, 1, 1] don't match (a.ne[0]=4 != b.ne[0]=5)" in text
    assert "permute: axes [0, 0, 1, 2] are not a permutation" in text


def test_a_ggml_abort_is_reported_by_the_hook():
    script = textwrap.dedent("""
        import ggrad.ggml as gg
        from ggrad.ggml import lib, hooks
        ctx = gg.Context(n_tensors=8)
        a = ctx.new_tensor("f32", (4, 3))
        b = ctx.new_tensor("f32", (5, 2))
        hooks.set_current_op("raw_mul_mat")
        lib.ggml_mul_mat(ctx.ptr, a.ptr, b.ptr)   # unvalidated: GGML_ASSERT(ggml_can_mul_mat(a, b))
        print("NOT REACHED")
    """)
    no_core = lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the abort must not leave a core file
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          preexec_fn=no_core)
    assert proc.returncode != 0
    assert "NOT REACHED" not in proc.stdout
    assert "GGML aborted" in proc.stderr and "raw_mul_mat" in proc.stderr, proc.stderr[-2000:]
