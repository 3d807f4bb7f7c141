"""`ggrad.profile()`: per-op time of every graph computed inside the block (GGML's op names; ggrad's own
CPU kernels by theirs, e.g. MATMUL_F32), from the scheduler's eval callback (each node is then computed
on its own, so totals run a little above normal steps).

    with ggrad.profile() as prof:
        train_step()
    print(prof.table())
"""

import time

from .. import ggml
from . import execution


class Profile:
    """Accumulated (calls, seconds) per GGML op name and tensor shape."""

    def __init__(self):
        self.records = {}
        self._start = 0.0
        self._previous = None

    def __enter__(self):
        self._previous = execution.eval_hook
        execution.eval_hook = self._observe
        return self

    def __exit__(self, *exc):
        execution.eval_hook = self._previous

    def _observe(self, tensor_ptr, ask):
        if ask:
            self._start = time.perf_counter()
            return True
        elapsed = time.perf_counter() - self._start
        t = ggml.GTensor(tensor_ptr, None)
        kernel = ggml.kernels.kernel_name(tensor_ptr)   # ggrad's own kernels go by their names
        key = (kernel.upper() if kernel else t.op, "x".join(str(n) for n in t.ne if n != 1) or "1")
        calls, total = self.records.get(key, (0, 0.0))
        self.records[key] = (calls + 1, total + elapsed)
        return True

    def by_op(self):
        """{op: (calls, seconds)} summed over shapes."""
        out = {}
        for (op, _), (calls, total) in self.records.items():
            c, t = out.get(op, (0, 0.0))
            out[op] = (c + calls, t + total)
        return out

    def table(self, top=25, by_shape=False):
        """The ops taking the most time, as a printable table."""
        rows = self.records if by_shape else {(op, ""): v for op, v in self.by_op().items()}
        total = sum(t for _, t in rows.values()) or 1.0
        lines = [f"{'op':<22}{'shape (ne)':<22}{'calls':>7}{'ms':>10}{'%':>7}"]
        for (op, shape), (calls, t) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:top]:
            lines.append(f"{op:<22}{shape:<22}{calls:>7}{t * 1e3:>10.2f}{100 * t / total:>7.1f}")
        lines.append(f"{'total':<44}{sum(c for c, _ in rows.values()):>7}{total * 1e3:>10.2f}")
        return "\n".join(lines)


def profile():
    return Profile()
