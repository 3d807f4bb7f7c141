"""ggrad.distributed over MPI, 2 and 3 ranks on localhost (mpiexec in subprocesses): the ranks stay bitwise
identical and match a single-process run on the same global batches; a dead rank is reported by every survivor.
Skipped without the optional extra (pip install -e ".[mpi]": mpi4py and the mpich wheel)."""

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ggrad
from ggrad import nn, optim
from ggrad.parallel import dp_train

ROOT = pathlib.Path(__file__).resolve().parents[2]
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")


def _mpi_loads():
    code = "from mpi4py import MPI; MPI.Get_version()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(MPIEXEC is None or not _mpi_loads(),
                                reason='needs mpi4py and an MPI (pip install -e ".[mpi]")')

# the model, data and training shared by the ranks and the single-process reference
_COMMON = """
import numpy as np
import ggrad
from ggrad import nn, optim


def model_and_optimizer():
    ggrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    return model, optim.AdamW(model.parameters(), lr=1e-2)


def batches():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((70, 6)).astype(np.float32)    # 4 batches of 16 and a last one of 6
    y = x[:, :3].argmax(1).astype(np.int32)
    return [(x[i:i + 16], y[i:i + 16]) for i in range(0, 70, 16)]
"""

_TRAIN = _COMMON + """
import sys
from ggrad import distributed
ggrad.set_num_threads(1)
out = sys.argv[1]


def train(**kwargs):
    model, opt = model_and_optimizer()
    history = distributed.dp_train(model, opt, "cross_entropy", batches(), devices=["cpu"], epochs=2, verbose=0,
                                   timeout=60, **kwargs)
    return [p.numpy() for p in model.parameters()], history.history["loss"]


weights, loss = train()
rank = distributed.rank()
np.savez(f"{out}/rank{rank}.npz", loss=np.array(loss), *weights)
# each rank names its own path: only rank 0's is written (at steps 3, 6 and 7) ...
train(max_steps=7, checkpoint=f"{out}/run{rank}.ckpt", checkpoint_every=3)
ggrad.manual_seed(5)
resumed, _ = train(resume=f"{out}/run{rank}.ckpt")   # ... and only rank 0 reads: rank 1's path does not exist
assert all(np.array_equal(a, b) for a, b in zip(weights, resumed)), "resume differs from the straight run"
"""

_DEAD_RANK = _COMMON + """
import os
import sys
from ggrad import distributed
from ggrad.train import Callback
ggrad.set_num_threads(1)


class DieAtStep3(Callback):
    def on_batch_end(self, batch, logs=None):
        if distributed.rank() == 2 and batch == 2:
            os._exit(7)


model, opt = model_and_optimizer()
try:
    if sys.argv[1] == "graph":     # dp_train on the CPU: the all-reduce inside the step's graph
        distributed.dp_train(model, opt, "cross_entropy", batches(), devices=["cpu"], callbacks=[DieAtStep3()],
                             verbose=0, timeout=3)
    else:                          # the host path (ranks with GPUs or RPC devices): read, all-reduce, upload
        ddp = distributed.DistributedDataParallel(model, ["cpu"], opt, timeout=3)
        ddp.in_graph = False
        for step, (x, y) in enumerate(batches()):
            ddp.step(x, y, ggrad.cross_entropy)
            if distributed.rank() == 2 and step == 2:
                os._exit(7)
except distributed.RankLostError as e:
    with open(f"report{distributed.rank()}.txt", "w") as f:
        f.write(str(e))
"""


def _mpiexec(tmp_path, n, script, *args, options=()):
    path = tmp_path / "script.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    return subprocess.run([MPIEXEC, *options, "-n", str(n), sys.executable, str(path), *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path)


def test_two_ranks_match_one_process_and_each_other_and_resume(tmp_path):
    proc = _mpiexec(tmp_path, 2, _TRAIN, str(tmp_path))
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    names = [k for k in ranks[0].files if k != "loss"]
    assert all(np.array_equal(ranks[0][k], ranks[1][k]) for k in names + ["loss"])   # replicas bitwise equal
    namespace = {}
    exec(_COMMON, namespace)
    model, opt = namespace["model_and_optimizer"]()
    history = dp_train(model, opt, "cross_entropy", namespace["batches"](), devices=["cpu"], epochs=2, verbose=0)
    for k, p in zip(names, model.parameters()):
        np.testing.assert_allclose(ranks[0][k], p.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ranks[0]["loss"], history.history["loss"], rtol=1e-5)
    assert ggrad.load(tmp_path / "run0.ckpt")["step"] == 7    # rank 0's checkpoint, at the end of the first part
    assert not (tmp_path / "run1.ckpt").exists()               # rank 1 wrote none, and resumed from rank 0's


@pytest.mark.parametrize("path", ["graph", "host"])
def test_a_dead_rank_is_reported_by_every_survivor(tmp_path, path):
    """Rank 2 of 3 exits after step 3; ranks 0 and 1 each raise RankLostError naming it, whether the all-reduce
    runs inside the step's graph or on the host."""
    proc = _mpiexec(tmp_path, 3, _DEAD_RANK, path, options=["-disable-auto-cleanup"])
    reports = sorted(p.name for p in tmp_path.glob("report*.txt"))
    assert reports == ["report0.txt", "report1.txt"], f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    for r in (0, 1):
        text = (tmp_path / f"report{r}.txt").read_text()
        assert f"rank {r} of 3: rank 2 (pid" in text and "exited" in text, text
    assert proc.returncode == 7   # mpiexec passes on the dead rank's exit status


_IN_GRAPH = """
import sys
import numpy as np
import ggrad
from ggrad import distributed, nn, optim
ggrad.set_num_threads(1)
out = sys.argv[1]
rng = np.random.default_rng(1)
x = rng.standard_normal((64, 6)).astype(np.float32)
y = x[:, :3].argmax(1).astype(np.int32)


def run(in_graph):
    ggrad.manual_seed(0)
    hidden = [m for _ in range(8) for m in (nn.Linear(16, 16), nn.Tanh())]   # 20 parameters: 3 bucket nodes
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.3), *hidden, nn.Linear(16, 3))
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    ddp = distributed.DistributedDataParallel(model, ["cpu"], opt)
    assert ddp.in_graph
    ddp.in_graph = in_graph
    computes, losses, spans = [], [], []
    for step in range(50):
        n = 9 + (step * 7) % 30                  # odd sizes: the two ranks' shards differ by one sample
        opt.param_groups[0]["lr"] = 1e-2 / (1 + step)
        before = ggrad.stats()["computes"]
        losses.append(ddp.step(x[:n], y[:n], ggrad.cross_entropy, max_grad_norm=0.5 if step % 3 else None))
        computes.append(ggrad.stats()["computes"] - before)
        spans.append([ddp.timings[k] for k in ("step", "record", "compute", "reduce", "update")])
    ddp.close()
    return [p.numpy() for p in model.parameters()], losses, computes, spans


weights, losses, computes, spans = run(True)
host_weights, host_losses, host_computes, host_spans = run(False)
np.savez(f"{out}/rank{distributed.rank()}.npz", *weights, losses=np.array(losses), computes=np.array(computes),
         host_computes=np.array(host_computes), host_losses=np.array(host_losses), spans=np.array(spans),
         host_spans=np.array(host_spans),
         **{f"host{i}": w for i, w in enumerate(host_weights)})
"""


_SMALL_BATCHES = _COMMON + """
import sys
from ggrad import distributed
ggrad.set_num_threads(1)
rng = np.random.default_rng(1)
x = rng.standard_normal((8, 6)).astype(np.float32)
y = x[:, :3].argmax(1).astype(np.int32)
for path in ("graph", "host"):
    model, opt = model_and_optimizer()
    ddp = distributed.DistributedDataParallel(model, ["cpu"], opt, timeout=60)
    ddp.in_graph = path == "graph"
    losses = [ddp.step(x[:n], y[:n], ggrad.cross_entropy) for n in (1, 2, 3, 1)]   # 3 ranks: some get nothing
    np.savez(f"{sys.argv[1]}/{path}{distributed.rank()}.npz", losses=np.array(losses),
             *[p.numpy() for p in model.parameters()])
"""


def test_batches_smaller_than_the_world_train_as_one_process(tmp_path):
    """A global batch of 1 or 2 over 3 ranks: the ranks left without a sample step on one that weighs 0,
    so every rank applies the global batch's update, on the in-graph path and on the host path."""
    proc = _mpiexec(tmp_path, 3, _SMALL_BATCHES, str(tmp_path))
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    namespace = {}
    exec(_COMMON, namespace)
    model, opt = namespace["model_and_optimizer"]()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    y = x[:, :3].argmax(1).astype(np.int32)
    want = []
    for n in (1, 2, 3, 1):
        loss = ggrad.cross_entropy(model(ggrad.tensor(x[:n])), ggrad.tensor(y[:n]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        want.append(loss.item())
    for path in ("graph", "host"):
        ranks = [np.load(tmp_path / f"{path}{r}.npz") for r in range(3)]
        names = [k for k in ranks[0].files if k.startswith("arr_")]
        assert all(np.array_equal(ranks[0][k], r[k]) for r in ranks[1:] for k in names + ["losses"]), path
        np.testing.assert_allclose(ranks[0]["losses"], want, rtol=1e-5, err_msg=path)
        for k, p in zip(names, model.parameters()):
            np.testing.assert_allclose(ranks[0][k], p.numpy(), rtol=1e-5, atol=1e-6, err_msg=path)


_MISMATCHED = _COMMON + """
import sys
from ggrad import distributed
ggrad.set_num_threads(1)
x = np.ones((4, 6), np.float32)
y = np.zeros(4, np.int32)
model, opt = model_and_optimizer()
ddp = distributed.DistributedDataParallel(model, ["cpu"], opt, timeout=30)
ddp.in_graph = sys.argv[1] == "graph"


def loss_fn(out, target):   # rank 1's loss reaches only the last layer's bias
    if distributed.rank() == 1:
        return ggrad.cross_entropy(out.detach() + model[2].bias, target)
    return ggrad.cross_entropy(out, target)


try:
    ddp.step(x, y, loss_fn)
except RuntimeError as e:
    with open(f"report{distributed.rank()}.txt", "w") as f:
        f.write(str(e))
"""


@pytest.mark.parametrize("path", ["graph", "host"])
def test_ranks_whose_gradients_differ_all_raise(tmp_path, path):
    """A parameter without a gradient on one rank only: every rank raises a RuntimeError that says so,
    instead of an all-reduce over buckets of different sizes."""
    proc = _mpiexec(tmp_path, 2, _MISMATCHED, path)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    for r in range(2):
        report = (tmp_path / f"report{r}.txt").read_text()
        assert "buckets differ in size" in report and "same parameters" in report, report


def test_cpu_ranks_reduce_inside_the_step_graph_and_stay_bitwise_identical(tmp_path):
    """A rank on the CPU alone all-reduces inside its graph: one compute a step, 50 steps with dropout,
    shards of unequal size, clipping and a changing learning rate leave both ranks bitwise equal, and
    the run matches the host path's (compute, read, all-reduce, upload, update) to float32 rounding."""
    proc = _mpiexec(tmp_path, 2, _IN_GRAPH, str(tmp_path))
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    names = [k for k in ranks[0].files if k.startswith("arr_")]
    assert names and all(np.array_equal(ranks[0][k], ranks[1][k]) for k in names + ["losses"])
    assert set(ranks[0]["computes"].tolist()) == {1} and set(ranks[0]["host_computes"].tolist()) == {2}
    for i, k in enumerate(names):
        np.testing.assert_allclose(ranks[0][k], ranks[0][f"host{i}"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ranks[0]["losses"], ranks[0]["host_losses"], rtol=1e-5)
    for key in ("spans", "host_spans"):   # step = record + compute + reduce + update, as DataParallel's
        spans = ranks[0][key]
        assert (spans >= 0).all() and (spans[:, 1] > 0).all() and (spans[:, 3] > 0).all(), key
        np.testing.assert_allclose(spans[:, 1:].sum(1), spans[:, 0], rtol=1e-9, atol=1e-9)
    assert (ranks[0]["spans"][:, 4] == 0).all() and (ranks[0]["host_spans"][:, 4] > 0).all()


def test_the_mpi_example_trains_checkpoints_and_resumes(tmp_path):
    """examples/dp_train_mpi.py under mpiexec -n 2, as its docstring runs it: 6 steps, then resumed to 9."""
    from ggrad.examples import char_gpt
    example = ROOT / "examples" / "dp_train_mpi.py"
    common = ["--corpus", char_gpt.__file__, "--d-model", "32", "--layers", "1", "--context", "16", "--batch", "8",
              "--checkpoint-every", "3", "--out", str(tmp_path), "--timeout", "60"]
    first = _mpiexec(tmp_path, 2, example.read_text(), "--steps", "6", *common)
    assert first.returncode == 0, f"exit {first.returncode}\n{first.stdout}\n{first.stderr[-3000:]}"
    assert first.stdout.count("2 ranks;") == 1 and "after 6 steps" in first.stdout   # rank 0 alone prints
    assert ggrad.load(tmp_path / "checkpoint.ckpt")["step"] == 6
    resumed = _mpiexec(tmp_path, 2, example.read_text(), "--steps", "9", "--resume", *common)
    assert resumed.returncode == 0, f"exit {resumed.returncode}\n{resumed.stdout}\n{resumed.stderr[-3000:]}"
    assert "at step 6" in resumed.stdout and "after 9 steps" in resumed.stdout
    assert ggrad.load(tmp_path / "checkpoint.ckpt")["step"] == 9
