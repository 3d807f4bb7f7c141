"""Temporary files after a kill (ggml/files.py): a save killed with SIGKILL mid-write leaves the previous
checkpoint intact and its temporary file behind (nothing can run at a SIGKILL); the next save of the same
target removes every such file whose writer is gone, and touches nothing else: a live writer's temporary
file, another target's, the user's own files. Each killed save is a child process killing itself inside
numpy's write, through ggrad.save and through a fit with ModelCheckpoint."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import ggrad
from ggrad.train.callbacks import ModelCheckpoint

ROOT = Path(__file__).resolve().parents[2]

_KILLED = """
import os, signal, sys
import numpy as np
import ggrad
from ggrad.train.callbacks import ModelCheckpoint


def dying(f, **members):   # np.savez: half a file written, then the process is killed
    f.write(b"PK half a checkpoint")
    os.kill(os.getpid(), signal.SIGKILL)


np.savez = dying
path = sys.argv[1]
if sys.argv[2] == "save":
    ggrad.save({"w": ggrad.full((4,), 2.0)}, path)
else:
    model = ggrad.Sequential(ggrad.nn.Linear(2, 1))
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((4, 2), np.float32)
    model.fit(x, x[:, :1], epochs=1, verbose=0,
              callbacks=[ModelCheckpoint(path, save_weights_only=True)])
"""


def _killed_save(path, how):
    proc = subprocess.run([sys.executable, "-c", _KILLED, str(path), how], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == -9, proc.stderr[-2000:]


def _temps(directory, target):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(f".{target}.") and p.suffix == ".tmp")


def test_the_next_save_removes_what_killed_saves_left(tmp_path):
    path = tmp_path / "ck.npz"
    ggrad.save({"w": ggrad.ones(4)}, path)
    left = []
    for how in ("save", "save", "fit"):
        _killed_save(path, how)
        left.append(_temps(tmp_path, "ck.npz"))
    assert [len(names) for names in left] == [1, 1, 1]     # each kill's; each killed save removed the last one's
    assert len({names[0] for names in left}) == 3
    np.testing.assert_array_equal(ggrad.load(path)["w"].numpy(), np.ones(4))   # the old checkpoint, intact
    others = [f".ck.npz.{os.getpid()}.abcdefgh.tmp",      # a live writer's (this process)
              ".other.npz.999999999.abcdefgh.tmp",          # another target's
              ".ck.npz.backup", "ck.npz.tmp", ".ck.npz.1.tmp", ".ck.npz.12.abc.tmp"]   # the user's own
    for name in others:
        (tmp_path / name).write_bytes(b"keep me")
    ggrad.save({"w": ggrad.zeros(4)}, path)
    assert _temps(tmp_path, "ck.npz") == sorted(n for n in others if n.startswith(".ck.npz.") and n.endswith(".tmp"))
    assert all((tmp_path / name).read_bytes() == b"keep me" for name in others)
    np.testing.assert_array_equal(ggrad.load(path)["w"].numpy(), np.zeros(4))


def test_model_checkpoint_removes_what_a_killed_fit_left(tmp_path):
    path = tmp_path / "weights.npz"
    _killed_save(path, "fit")
    assert len(_temps(tmp_path, "weights.npz")) == 1
    model = ggrad.Sequential(ggrad.nn.Linear(2, 1))
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((4, 2), np.float32)
    model.fit(x, x[:, :1], epochs=2, verbose=0, callbacks=[ModelCheckpoint(path, save_weights_only=True)])
    assert _temps(tmp_path, "weights.npz") == []
    assert set(ggrad.load(path)) == set(model.state_dict())
