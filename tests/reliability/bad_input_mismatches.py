"""Measure where ggrad's exception types differ from PyTorch's on bad input.

Runs the bad-input family (bad_input_family.py: every public function, nn.functional function and Tensor
method that PyTorch also has, called with the same bad arguments on both sides) in child processes that are
restarted past any call that kills them, and lists each call where PyTorch raised type X and ggrad raised no
X (another type, no error at all, or a crash).

    python tests/reliability/bad_input_mismatches.py [--all]   (--all prints every mismatch, not 40)
"""

import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import bad_input_family as family  # noqa: E402  (its tables; the calls run in the child)


def run_family(out, selftest=False):
    """({(label, args): record} for every call of the family, [the calls that killed the child], total)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), GGRAD_FAMILY_SELFTEST="abort" if selftest else "")
    total = len(family.cases(selftest))
    start, killed, records = 0, [], []
    while start < total:
        proc = subprocess.run([sys.executable, str(HERE / "bad_input_family.py"), str(out), str(start)],
                              capture_output=True, text=True, timeout=1200, env=env, cwd=ROOT)
        records = [json.loads(line) for line in Path(out).read_text().splitlines()]
        if proc.returncode == 0:
            break
        last = [r for r in records if "start" in r][-1]
        killed.append((last["label"], last["args"], proc.returncode, proc.stderr[-500:]))
        start = last["start"] + 1
    done = {(r["label"], r["args"]): r for r in records if "done" in r}
    return done, killed, total


def mismatch(record):
    """Why ggrad's outcome is not PyTorch's exception type ('' when it is, or when PyTorch did not raise)."""
    theirs, ours = record["torch"], record["ggrad"]
    if theirs["kind"] != "raised" or ours["kind"] == "skip":
        return ""
    if ours["kind"] == "ok":
        return f"torch {theirs['types'][0]}, ggrad returned"
    if theirs["types"][0] in ours["types"]:
        return ""
    return f"torch {theirs['types'][0]}, ggrad {ours['types'][0]}: {ours['message'][:120]!r}"


def mismatches(done, killed):
    """{(label, args): reason} for every call whose error type differs from PyTorch's, crashes included."""
    out = {key: why for key, r in sorted(done.items()) if (why := mismatch(r))}
    for label, args, rc, _ in killed:
        out[(label, args)] = f"the child died (exit {rc})"
    return out


def main(argv):
    with tempfile.TemporaryDirectory() as tmp:
        done, killed, total = run_family(Path(tmp) / "family.jsonl")
    found = mismatches(done, killed)
    shown = list(found.items()) if "--all" in argv else list(found.items())[:40]
    for (label, args), why in shown:
        print(f"{label}({args}): {why}")
    by_arg = collections.Counter(args for _, args in found)
    print(f"\n{len(found)} mismatching calls of {total} ({len(killed)} crashed); by argument: {dict(by_arg)}")


if __name__ == "__main__":
    main(sys.argv[1:])
