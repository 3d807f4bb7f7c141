"""Run the members of a family of cases, each an expression evaluated by ggrad and by PyTorch, in one child
interpreter, so that a member that kills the process fails its test (naming the member) instead of pytest.

    outcomes = run_members({"name": ("ggrad expression", "torch expression or None"), ...})

Each side's outcome is ("ok", values) with the result's values as nested lists (a tuple result: a list of
them), or ("raised", [the exception's type and base type names], message).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import json, sys, warnings
import numpy as np
import torch
import ggrad
import ggrad.nn.functional as F
import torch.nn.functional as TF
warnings.simplefilter("ignore")
ggrad.ggml.hooks.set_log_level("none")


def values(r):
    if isinstance(r, (tuple, list)):
        return [values(v) for v in r]
    if isinstance(r, (ggrad.Tensor, torch.Tensor)):
        return np.asarray(r.detach().numpy(), dtype=np.float64).tolist()
    return r


def outcome(expression, names):
    try:
        return ["ok", values(eval(expression, names))]
    except Exception as e:   # noqa: BLE001  (the type is what is compared)
        return ["raised", [c.__name__ for c in type(e).__mro__], str(e)[:400]]


for name, (ours, theirs) in json.loads(sys.argv[1]).items():
    print(json.dumps({"start": name}), flush=True)
    result = {"ggrad": outcome(ours, {"ggrad": ggrad, "F": F, "np": np})}
    if theirs is not None:
        result["torch"] = outcome(theirs, {"torch": torch, "F": TF, "np": np})
    print(json.dumps({"done": name, **result}), flush=True)
"""


def run_members(cases, timeout=600):
    """{name: {"ggrad": outcome, "torch": outcome (where a torch expression is given)}} (module docstring)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(cases)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        last = [r["start"] for r in records if "start" in r][-1:] or ["(before the first case)"]
        raise AssertionError(f"the child died (exit {proc.returncode}) in case {last[0]}:\n{proc.stderr[-2000:]}")
    return {r["done"]: r for r in records if "done" in r}
