"""Child of test_failed_compute.py: one scenario of a compute that fails, then what the program reads after.

    python failed_compute_child.py SCENARIO PHASE   (PHASE: plan, upload or compute; or none)

A failure is injected in PHASE by replacing the GGML call of that phase (the scheduler's plan, a tensor's
upload, the scheduler's compute) with one that raises, for one call. Prints one JSON line of what was read,
with "raised": how many injected failures reached the program (a phase a scenario never enters would
make the test meaningless: the parent checks it).
"""

import gc
import json
import sys

import numpy as np

import ggrad
from ggrad import ggml

CALLS = {"plan": (ggml.Scheduler, "alloc"), "upload": (ggml.GTensor, "write"),
         "compute": (ggml.Scheduler, "compute")}
REAL = {phase: getattr(owner, name) for phase, (owner, name) in CALLS.items()}


class Injected(RuntimeError):
    """The failure a scenario injects."""


def fail_once(phase):
    """Make the GGML call of `phase` raise Injected the next time it is made (then work again)."""
    if phase == "none":
        return
    owner, name = CALLS[phase]

    def failing(*args, **kwargs):
        setattr(owner, name, REAL[phase])
        raise Injected(f"injected into {phase}")

    setattr(owner, name, failing)


def disarm():
    """Put back every GGML call that `fail_once` replaced and that was not made."""
    for phase, (owner, name) in CALLS.items():
        setattr(owner, name, REAL[phase])


def persistent():
    """Device memory held by tensors (pooled buffers handed out), after dropped ones are collected."""
    gc.collect()
    return sum(m["persistent"] for m in ggrad.stats()["memory"].values())


def fresh_graph(phase):
    """A held input and a result computed from it: the read that fails, then reads of both."""
    a = ggrad.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    before = persistent()
    y = (a * 2).sum(0)
    fail_once(phase)
    raised = 0
    try:
        y.numpy()
    except Injected:
        raised += 1
    after = persistent()
    return {"raised": raised, "memory_before": before, "memory_after_failure": after, "y": y.numpy().tolist(),
            "a": a.numpy().tolist(), "sum": a.sum().item()}


def training(phase, failing_step):
    """Three Adam steps; the compute of `failing_step`'s update fails once (step 0 plans a new graph, step 2
    replays the cached one) and `ggrad.realize()` computes it again."""
    ggrad.manual_seed(0)
    model = ggrad.nn.Sequential(ggrad.nn.Linear(4, 8), ggrad.nn.Tanh(), ggrad.nn.Linear(8, 1))
    opt = ggrad.optim.Adam(model.parameters(), lr=0.01)
    losses, raised = [], 0
    for step in range(3):
        x = ggrad.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4) * (step + 1))
        loss = model(x).square().mean()
        loss.backward()
        if step == failing_step:
            fail_once(phase)
        try:
            opt.step()
        except Injected:
            raised += 1
            ggrad.realize()
        opt.zero_grad()
        losses.append(loss.item())
    return {"raised": raised, "losses": losses, "weights": [p.numpy().tolist() for p in model.parameters()],
            "cache_hits": ggrad.stats()["cache_hits"]}


def too_big(phase):
    """The issue's example: a result whose plan does not fit in memory, then a held input's sum."""
    ggrad.ggml.hooks.set_log_level("none")
    a = ggrad.ones(1000)
    before = persistent()
    raised = 0
    try:
        (ggrad.ones(10**6, 1) + ggrad.ones(1, 10**6)).numpy()
    except MemoryError:
        raised += 1
    after = persistent()
    return {"raised": raised, "memory_before": before, "memory_after_failure": after, "sum": a.sum().item()}


SCENARIOS = {"fresh_graph": fresh_graph, "too_big": too_big,
             "first_step": lambda phase: training(phase, 0), "replayed_step": lambda phase: training(phase, 2)}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](sys.argv[2])))
