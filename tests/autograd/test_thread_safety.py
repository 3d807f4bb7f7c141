"""Independent models trained in separate threads give the results of training them one after the other.

The threaded run happens in a subprocess (this file run as a script): a regression that crashes GGML
then fails the test instead of killing the test session.
"""

import subprocess
import sys
import threading

import numpy as np

import ggrad
from ggrad import nn, optim


def _train(seed, steps=15):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((32, 6)).astype(np.float32)
    y = rng.integers(0, 3, 32).astype(np.int32)
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))
    with ggrad.no_grad():
        for p in model.parameters():
            p.copy_(ggrad.tensor(rng.standard_normal(p.shape).astype(np.float32) * 0.3))
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        loss = ggrad.cross_entropy(model(ggrad.tensor(x)), ggrad.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.numpy() for p in model.parameters()]


def _threaded(seeds):
    results, errors = [None] * len(seeds), []

    def work(i):
        try:
            results[i] = _train(seeds[i])
        except Exception as e:  # noqa: BLE001  (reported by the caller)
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(seeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


def test_threads_match_sequential_runs():
    proc = subprocess.run([sys.executable, __file__], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"the threaded run died (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip().splitlines()[-1] == "same", proc.stdout


if __name__ == "__main__":
    seeds = [0, 1, 2, 3]
    expected = [_train(s) for s in seeds]
    for attempt in range(3):
        got, errors = _threaded(seeds)
        if errors:
            print("errors:", errors)
            sys.exit(0)
        for g, e in zip(got, expected):
            for a, b in zip(g, e):
                if not np.array_equal(a, b):
                    print("different")
                    sys.exit(0)
    print("same")
