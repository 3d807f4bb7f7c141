"""Results do not depend on the thread count: a transformer's AdamW steps with class-index cross-entropy and
a fit epoch give the same losses, weights and optimizer state, bit for bit, at 1, 2 and 3 threads
(thread_count_child.py, one process per count). GGML's fused cross_entropy_loss added per-thread partial
sums: the loss differed in its last bit between 1 and 2 threads (0.77504438 vs 0.77504444)."""

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _run(threads):
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    env.pop("GGRAD_NUM_THREADS", None)
    proc = subprocess.run([sys.executable, str(HERE / "thread_count_child.py"), str(threads)], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_losses_weights_and_state_are_the_same_bits_at_1_2_and_3_threads():
    runs = {threads: _run(threads) for threads in (1, 2, 3)}
    assert [r["threads"] for r in runs.values()] == [1, 2, 3]
    for threads in (2, 3):
        assert runs[threads]["transformer"] == runs[1]["transformer"], threads
        assert runs[threads]["fit"] == runs[1]["fit"], threads
