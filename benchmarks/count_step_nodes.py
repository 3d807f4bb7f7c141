"""Node counts of one GPT training step per GGML op, where every copy (CONT, CPY) comes from, and the bytes
each op moves.

Builds the step (forward, backward, AdamW) under a chosen backend's lowering (lowering.py) on the CPU:
the node counts do not depend on the device the graph then runs on, so the CUDA lowering's counts of
the big GPT are read on a machine without a GPU. Each CONT and CPY is attributed to the rule that
made it: the phase (forward, or the backward of an op), the model code it came from (attention,
linear, layer norm, loss...) and the op that needed the copy. The per-op table is that of the graph
actually computed (`ggrad.profile()`); the attribution is read from the Python stack at build time.

`--traffic` adds, per op, the bytes its nodes read and write (each source's and the result's size; views
move nothing): outside the matrix products a GPU step is bound by memory bandwidth, so this is the
device-independent estimate of where its time goes, and of what a change of lowering or dtype saves.
(GGML's CUDA mul_mat of half operands also converts inside the node: not counted.)

    python benchmarks/count_step_nodes.py [--config w2|big] [--lowering CPU|CUDA|CUDA_TWINS|VULKAN|VULKAN_SHADERS]
                                          [--autocast none|f16|bf16] [--batch N] [--traffic]
"""

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpt  # noqa: E402
from gpt_torch import CONFIGS  # noqa: E402

import ggrad  # noqa: E402
from ggrad.autograd import execution, lowering, trace_cache  # noqa: E402
from ggrad.autograd.primitive import Primitive  # noqa: E402
from ggrad.ggml import GTensor, ffi, hooks, lib  # noqa: E402

COPIES = ("cont", "cast", "cpy", "concat")   # concat: also the CPU's transposed copies (lowering.transpose_copy)
SHOWN = ("CONT", "CONCAT", "CPY", "MUL_MAT", "OUT_PROD", "TRANSPOSE", "PERMUTE", "RESHAPE", "VIEW")
_NN = os.sep + os.path.join("ggrad", "nn") + os.sep
_OPS = os.sep + os.path.join("ggrad", "autograd", "ops") + os.sep
_SKIPPED_NN = ("module.py", "containers.py", "transformer_layers.py")


def model_site(frame):
    """Where in the model code `frame`'s call stack is: 'attention.py:forward', 'functional.py:attend', ...

    The innermost frame in ggrad/nn (past module plumbing), else the innermost op function."""
    op_site = None
    while frame is not None:
        path = frame.f_code.co_filename
        name = os.path.basename(path)
        if _NN in path and name not in _SKIPPED_NN:
            return f"{name}:{frame.f_code.co_name}"
        if op_site is None and _OPS in path and frame.f_code.co_name not in ("build", "backward", "apply"):
            op_site = f"{name}:{frame.f_code.co_name}"
        frame = frame.f_back
    return op_site or "?"


class CopyLog:
    """Records, for every copy node built while `on`, (phase, model site, the op that needed it)."""

    def __init__(self):
        self.on = False
        self.sites = collections.Counter()

    def install(self):
        previous_op = hooks.set_current_op
        record = Primitive._record.__func__

        def set_current_op(name):
            if self.on and name in COPIES:
                self.sites[(name.upper() if name in ("cont", "concat") else "CPY",) + self.where(sys._getframe(1))] += 1
            previous_op(name)

        def _record(cls, ctx, args, tensors):
            ctx._count_site = model_site(sys._getframe(1))   # read again when its backward runs
            return record(cls, ctx, args, tensors)

        hooks.set_current_op = set_current_op
        Primitive._record = classmethod(_record)

    @staticmethod
    def where(frame):
        needed_by = phase = None
        site = model_site(frame)
        while frame is not None:
            code, local = frame.f_code, frame.f_locals
            if needed_by is None and code.co_name == "_record" and "cls" in local:
                needed_by = local["cls"].__name__
            if code.co_name == "gradients" and "ctx" in local and "cls" in local:
                phase = f"backward of {local['cls'].__name__}"
                site = getattr(local["ctx"], "_count_site", site)
                break
            frame = frame.f_back
        return phase or "forward", site, needed_by or "(in a builder)"


class Traffic:
    """Bytes read and written per GGML op of the graphs computed while installed as the eval callback."""

    MOVES_NOTHING = ("NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE")

    def __init__(self):
        self.bytes = collections.Counter()

    def observe(self, ptr, ask):
        if ask:
            return True
        op = GTensor(ptr, None).op
        if op not in self.MOVES_NOTHING:
            sources = [ptr.src[i] for i in range(len(ptr.src)) if ptr.src[i] != ffi.NULL]
            self.bytes[op] += sum(int(lib.ggml_nbytes(t)) for t in [ptr] + sources)
        return True


def count(config, lowering_name, autocast, batch, threads=2, traffic=None):
    """(per-op counts of the computed step graph, copy attribution Counter) of one training step; with a
    Traffic, one step more is computed with it observing."""
    ggrad.set_num_threads(threads)
    cfg = dict(CONFIGS[config], **({"batch": batch} if batch else {}))
    trace_cache.ENABLED = False   # build every step's graph (a cached replay builds nothing)
    log = CopyLog()
    log.install()
    with execution.forced_lowering(ggrad.device("cpu"), getattr(lowering, lowering_name)):
        step = bench_gpt.ggrad_step_fn("cpu", cfg, None if autocast == "none" else autocast)
        step()   # warm-up: the first step also makes AdamW's state
        log.on = True
        with ggrad.profile() as prof:
            step()
        log.on = False
        if traffic is not None:
            previous, execution.eval_hook = execution.eval_hook, traffic.observe
            try:
                step()
            finally:
                execution.eval_hook = previous
    ops = {op: calls for op, (calls, _) in prof.by_op().items()}
    return ops, log.sites


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="w2", choices=sorted(CONFIGS))
    parser.add_argument("--lowering", default="CPU",
                        choices=["CPU", "CUDA", "CUDA_TWINS", "VULKAN", "VULKAN_SHADERS"])
    parser.add_argument("--autocast", default="none", choices=["none", "f16", "bf16"])
    parser.add_argument("--batch", type=int, help="batch size (default the config's; counts do not depend on it)")
    parser.add_argument("--all-ops", action="store_true", help="list every op, not only copies and matmuls")
    parser.add_argument("--traffic", action="store_true", help="also the bytes each op reads and writes")
    args = parser.parse_args()
    traffic = Traffic() if args.traffic else None
    ops, sites = count(args.config, args.lowering, args.autocast, args.batch, traffic=traffic)
    print(f"{args.config} step, {args.lowering} lowering, autocast {args.autocast}: nodes per op")
    for op, n in sorted(ops.items(), key=lambda kv: -kv[1]):
        if args.all_ops or op in SHOWN:
            print(f"  {op:<24}{n:>6}")
    print(f"  {'all nodes':<24}{sum(ops.values()):>6}")
    print("\ncopies by origin (op, phase, model code, the op that needed it)")
    for (op, phase, site, needed_by), n in sorted(sites.items(), key=lambda kv: (kv[0][0], -kv[1])):
        print(f"  {op:<6}{n:>5}  {phase:<28}{site:<34}{needed_by}")
    for op in ("CONT", "CONCAT", "CPY"):
        built = sum(n for key, n in sites.items() if key[0] == op)
        print(f"  {op} built {built}, in the computed graph {ops.get(op, 0)}")
    if traffic is not None:
        total = sum(traffic.bytes.values())
        print(f"\nbytes read and written per op (GB; all ops {total / 1e9:.2f})")
        for op, n in traffic.bytes.most_common():
            print(f"  {op:<24}{ops.get(op, 0):>6}{n / 1e9:>9.3f}{100 * n / total:>7.1f}%")


if __name__ == "__main__":
    main()
