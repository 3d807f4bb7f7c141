"""The success-path cost of the argument boundary (autograd/boundary.py): a public Tensor method called
through its `typed` wrapper against the same function called directly, in one run.

The wrapper does nothing on a good call but forward it (the argument-kind table is read only after a
call has failed), so the difference is one Python call with *args/**kwargs. Median of repeats of
`timeit` batches, in nanoseconds per call.

    python benchmarks/bench_boundary.py [--repeats 15] [--number 200000]
"""

import argparse
import statistics
import timeit

import ggrad
from ggrad.autograd import methods


def median_ns(stmt, number, repeats):
    return statistics.median(timeit.repeat(stmt, number=number, repeat=repeats)) / number * 1e9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--number", type=int, default=200000)
    args = parser.parse_args()
    x = ggrad.ones(2, 3)
    rows = []
    for name in ("element_size", "is_contiguous", "stride"):
        wrapped = getattr(x, name)
        direct = methods._METHODS[name]
        through = median_ns(lambda: wrapped(), args.number, args.repeats)
        plain = median_ns(lambda: direct(x), args.number, args.repeats)
        rows.append((name, plain, through))
    print(f"{'method':<16}{'direct ns':>12}{'wrapped ns':>12}{'overhead ns':>13}")
    for name, plain, through in rows:
        print(f"{name:<16}{plain:>12.0f}{through:>12.0f}{through - plain:>13.0f}")


if __name__ == "__main__":
    main()
