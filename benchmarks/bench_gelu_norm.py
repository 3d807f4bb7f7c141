"""GELU (tanh) and layer norm on the CPU: ggrad's kernels at each instruction set the CPU has, against
the GGML compositions they replace (`_gelu_tanh_by_silu` and its 11-node gradient; GGML's norm and the
rms_norm_back composition), forward and backward, in ns per element of an f32 [rows, cols] input at one
thread. Times are node times from ggrad.profile() (each node computed on its own: a composition's many
nodes pay a few us each more than in a normal step), best of --repeats steps.

    python benchmarks/bench_gelu_norm.py [--shape 1024 512] [--repeats 20]
"""

import argparse
import dataclasses
import sys

import ggrad
from ggrad.autograd import execution, lowering
from ggrad.ggml import kernels

VIEWS = {"NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"}


def node_seconds(step):
    """Seconds of the nodes (views aside) of the graph `step` computes."""
    with ggrad.profile() as prof:
        step()
    return sum(t for op, (_, t) in prof.by_op().items() if op not in VIEWS)


def best(step, repeats):
    step()   # builds and caches the graph
    return min(node_seconds(step) for _ in range(repeats))


def measure(fn, shape, repeats):
    """(forward, backward) seconds of fn on a [rows, cols] input: the forward alone, and the forward with
    its backward less the forward."""
    x = ggrad.randn(*shape)
    xg = ggrad.randn(*shape, requires_grad=True)
    g = ggrad.randn(*shape)

    def forward():
        with ggrad.no_grad():
            fn(x).numpy()

    def both():   # y read too: a backward that needs only x would leave the forward's node out
        xg.grad = None
        y = fn(xg)
        y.backward(g)
        y.numpy()
        xg.grad.numpy()
    f = best(forward, repeats)
    return f, best(both, repeats) - f


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=2, default=[1024, 512])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    ggrad.set_num_threads(1)
    cpu = ggrad.device("cpu")
    ops = {"gelu": lambda t: ggrad.nn.functional.gelu(t, approximate="tanh"),
           "layer_norm": lambda t: ggrad.nn.functional.layer_norm(t, (args.shape[1],))}
    composed = dataclasses.replace(lowering.CPU, gelu_tanh="silu", layer_norm="norm")
    isas = [i for i in ("avx512", "avx2", "generic") if kernels.isa(i) == i]
    kernels.isa("best")
    n = args.shape[0] * args.shape[1]
    print(f"f32 {args.shape}, one thread, ns per element (best of {args.repeats})")
    print(f"{'op':<12}{'pass':<10}" + "".join(f"{'kernel ' + i:>16}" for i in isas) + f"{'GGML ops':>12}")
    for name, fn in ops.items():
        rows = {"forward": [], "backward": []}
        for isa in isas:
            kernels.isa(isa)
            with execution.forced_lowering(cpu, lowering.CPU):
                f, b = measure(fn, args.shape, args.repeats)
            rows["forward"].append(f)
            rows["backward"].append(b)
        kernels.isa("best")
        with execution.forced_lowering(cpu, composed):
            f, b = measure(fn, args.shape, args.repeats)
        rows["forward"].append(f)
        rows["backward"].append(b)
        for pass_, times in rows.items():
            print(f"{name:<12}{pass_:<10}" + "".join(f"{t / n * 1e9:>16.3f}" for t in times[:-1])
                  + f"{times[-1] / n * 1e9:>12.3f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
