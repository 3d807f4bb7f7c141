"""torch.distributed's surface (`import ggrad as torch`), 2 and 3 ranks on localhost, launched by mpiexec (over
MPI) and as torchrun launches them (processes with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT:
over TCP): the collectives in place as PyTorch's, DistributedDataParallel + DistributedSampler training as
one process on the full batch (also with no_sync and unused parameters), and init_process_group's rules and
errors as PyTorch's. The mpiexec runs are skipped without the optional extra (pip install -e ".[mpi]")."""

import os
import pathlib
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

import ggrad
from ggrad import nn

ROOT = pathlib.Path(__file__).resolve().parents[2]
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")


def _mpi_loads():
    code = "from mpi4py import MPI; MPI.Get_version()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


needs_mpi = pytest.mark.skipif(MPIEXEC is None or not _mpi_loads(),
                               reason='needs mpi4py and an MPI (pip install -e ".[mpi]")')
LAUNCHERS = [pytest.param("mpiexec", marks=needs_mpi), "torchrun"]
_TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in _TORCHRUN_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env.update(extra)
    return env


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(command, n, env, cwd, timeout=180, ranks=None):
    """Run `command` as n processes with torchrun's variables (rank r gets RANK=ranks[r], default r); one
    CompletedProcess: the first nonzero exit code, the outputs joined in rank order."""
    port, procs = free_port(), []
    try:
        for r in range(n):
            rank = r if ranks is None else ranks[r]
            variables = dict(RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(n),
                             MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            procs.append(subprocess.Popen(command, env={**env, **variables}, cwd=cwd, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        outputs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    codes = [p.returncode for p in procs]
    return subprocess.CompletedProcess(command, next((c for c in codes if c), 0), "".join(o for o, _ in outputs),
                                       "".join(e for _, e in outputs))


def _run(tmp_path, script, n=None, args=(), env=None, launcher="mpiexec"):
    path = tmp_path / "script.py"
    path.write_text(script)
    command = [sys.executable, str(path), str(tmp_path), *args]
    if n is not None and launcher == "torchrun":
        return torchrun(command, n, env or _env(), tmp_path)
    if n is not None:
        command = [MPIEXEC, "-n", str(n)] + command
    return subprocess.run(command, capture_output=True, text=True, timeout=180, env=env or _env(), cwd=tmp_path)


def _ok(proc):
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"


_COLLECTIVES = """
import sys
import numpy as np
import ggrad as torch
import ggrad.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
out = {}
for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX"):
    t = torch.tensor([[1.5, -2.0, 3.0], [0.25, 4.0, -1.0]]) * (rank + 1)
    view = t[1]
    work = dist.all_reduce(t, op=getattr(dist.ReduceOp, op), async_op=op == "AVG")
    assert (work is None) == (op != "AVG") and (work is None or work.wait())
    out[f"f_{op}"], out[f"view_{op}"] = t.numpy(), view.numpy()
for op in ("SUM", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG"):
    t = torch.tensor([3, 5, -7, 12]) * (rank + 2)
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
    out[f"i_{op}"] = t.numpy()
w = torch.zeros(3, requires_grad=True)   # a leaf that requires grad: in place as in PyTorch
with torch.no_grad():
    w.add_(float(rank))
dist.broadcast(w, src=world - 1)
out["broadcast"] = w.detach().numpy()
dist.barrier()
parts = [torch.zeros(2, 2) for _ in range(world)]
dist.all_gather(parts, torch.full((2, 2), float(rank)))
out["all_gather"] = np.stack([p.numpy() for p in parts])
joined, stacked = torch.zeros(world * 2, 3), torch.zeros(world, 2, 3)
dist.all_gather_into_tensor(joined, torch.arange(6.).reshape(2, 3) + 10 * rank)
dist.all_gather_into_tensor(stacked, torch.arange(6.).reshape(2, 3) + 10 * rank)
out["gather_joined"], out["gather_stacked"] = joined.numpy(), stacked.numpy()
got = torch.zeros(2)
dist.reduce_scatter(got, [torch.tensor([1.0, 2.0]) * (r + 1) * (rank + 1) for r in range(world)])
out["reduce_scatter"] = got.numpy()
got = torch.zeros(2)
dist.reduce_scatter_tensor(got, torch.arange(2. * world) * (rank + 1), op=dist.ReduceOp.MAX)
out["reduce_scatter_tensor"] = got.numpy()
torch.manual_seed(rank)
module = torch.nn.BatchNorm1d(3)
module.running_mean.fill_(float(rank))
ddp = torch.nn.parallel.DistributedDataParallel(module)
out["weight"], out["running_mean"] = module.weight.detach().numpy(), module.running_mean.numpy()
dist.destroy_process_group()
out["after"] = np.array(dist.is_initialized())
np.savez(f"{sys.argv[1]}/rank{rank}.npz", **out)
"""


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("world", [2, 3])
def test_collectives_in_place_as_pytorch(tmp_path, world, launcher):
    _ok(_run(tmp_path, _COLLECTIVES, world, launcher=launcher))
    base = np.array([[1.5, -2.0, 3.0], [0.25, 4.0, -1.0]], np.float32)
    values = np.stack([base * (r + 1) for r in range(world)])
    ints = np.stack([np.array([3, 5, -7, 12]) * (r + 2) for r in range(world)])
    for rank in range(world):
        got = np.load(tmp_path / f"rank{rank}.npz")
        for op, want in (("SUM", values.sum(0)), ("AVG", values.sum(0) / world), ("PRODUCT", values.prod(0)),
                         ("MIN", values.min(0)), ("MAX", values.max(0))):
            np.testing.assert_allclose(got[f"f_{op}"], want, rtol=1e-6, err_msg=op)
            np.testing.assert_allclose(got[f"view_{op}"], want[1], rtol=1e-6, err_msg=op)   # views see it
        for op, want in (("SUM", ints.sum(0)), ("MIN", ints.min(0)), ("MAX", ints.max(0)),
                         ("BAND", np.bitwise_and.reduce(ints)), ("BOR", np.bitwise_or.reduce(ints)),
                         ("BXOR", np.bitwise_xor.reduce(ints)), ("AVG", np.trunc(ints.sum(0) / world))):
            assert got[f"i_{op}"].dtype == np.int64 and np.array_equal(got[f"i_{op}"], want), op
        assert np.array_equal(got["broadcast"], np.full(3, world - 1.0))
        assert np.array_equal(got["all_gather"], np.stack([np.full((2, 2), r) for r in range(world)]))
        gathered = np.stack([np.arange(6.).reshape(2, 3) + 10 * r for r in range(world)])
        assert np.array_equal(got["gather_joined"], gathered.reshape(world * 2, 3))
        assert np.array_equal(got["gather_stacked"], gathered)
        scale = sum(r + 1 for r in range(world))
        np.testing.assert_allclose(got["reduce_scatter"], np.array([1.0, 2.0]) * (rank + 1) * scale)
        maxima = (np.arange(2. * world) * world).reshape(world, 2)   # every rank's input times world at most
        np.testing.assert_allclose(got["reduce_scatter_tensor"], maxima[rank])
        assert np.array_equal(got["running_mean"], np.zeros(3))   # rank 0's buffers and parameters
        assert not got["after"]


# one DDP training run: DistributedSampler shards, AdamW; `phase` picks the plain steps or no_sync accumulation
_DDP = """
import sys
import numpy as np
import ggrad as torch
import ggrad.distributed as dist
from ggrad.nn.parallel import DistributedDataParallel
from ggrad.utils.data import DataLoader, TensorDataset
from ggrad.utils.data.distributed import DistributedSampler
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)    # every rank starts elsewhere: DDP gives them rank 0's weights
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
ddp = DistributedDataParallel(model, bucket_cap_mb=0.0005)    # 131 floats a message: several buckets
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
rng = np.random.default_rng(0)
x = rng.standard_normal((48, 6)).astype(np.float32)
y = x[:, :3].argmax(1)
data = TensorDataset(torch.tensor(x), torch.tensor(y))
sampler = DistributedSampler(data, shuffle=True, seed=3)
loader = DataLoader(data, batch_size=12 // world, sampler=sampler)
losses = []
for epoch in range(2):
    sampler.set_epoch(epoch)
    batches = iter(loader)
    for xb, yb in batches:
        opt.zero_grad()
        if sys.argv[2] == "no_sync":     # two micro-batches, the first without the all-reduce
            with ddp.no_sync():
                torch.nn.functional.cross_entropy(ddp(xb), yb).backward()
            xb, yb = next(batches)
        loss = torch.nn.functional.cross_entropy(ddp(xb), yb)
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        losses.append(mean.item())
np.savez(f"{sys.argv[1]}/rank{rank}.npz", *[p.detach().numpy() for p in model.parameters()],
         losses=np.array(losses))
dist.destroy_process_group()
"""


def _one_process(world, phase):
    """The same training in one process: each step on the union of the ranks' batches (their samplers)."""
    from ggrad.utils.data.distributed import DistributedSampler
    ggrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = ggrad.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((48, 6)).astype(np.float32)
    y = x[:, :3].argmax(1)
    losses, per = [], 12 // world
    for epoch in range(2):
        orders = []
        for r in range(world):
            sampler = DistributedSampler(range(48), num_replicas=world, rank=r, shuffle=True, seed=3)
            sampler.set_epoch(epoch)
            orders.append(list(sampler))
        steps = [np.concatenate([o[i:i + per] for o in orders]) for i in range(0, len(orders[0]), per)]
        pairs = zip(steps[::2], steps[1::2]) if phase == "no_sync" else ((None, s) for s in steps)
        for first, last in pairs:
            opt.zero_grad()
            if first is not None:
                ggrad.cross_entropy(model(ggrad.tensor(x[first])), ggrad.tensor(y[first])).backward()
            loss = ggrad.cross_entropy(model(ggrad.tensor(x[last])), ggrad.tensor(y[last]))
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return [p.numpy() for p in model.parameters()], losses


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("phase", ["steps", "no_sync"])
def test_ddp_trains_as_one_process_on_the_full_batch(tmp_path, world, phase, launcher):
    _ok(_run(tmp_path, _DDP, world, [phase], launcher=launcher))
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(world)]
    names = [k for k in ranks[0].files if k.startswith("arr_")]
    for other in ranks[1:]:   # the replicas stay bitwise equal
        assert all(np.array_equal(ranks[0][k], other[k]) for k in names + ["losses"])
    weights, losses = _one_process(world, phase)
    assert len(losses) == len(ranks[0]["losses"]) == (8 if phase == "steps" else 4)
    np.testing.assert_allclose(ranks[0]["losses"], losses, rtol=1e-5)
    for k, w in zip(names, weights):
        np.testing.assert_allclose(ranks[0][k], w, rtol=1e-4, atol=1e-5)


_UNUSED = """
import sys
import numpy as np
import ggrad as torch
import ggrad.distributed as dist
from ggrad.nn.parallel import DistributedDataParallel
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()


class Heads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.a, self.b, self.never = (torch.nn.Linear(4, 4) for _ in range(4))

    def forward(self, x):   # rank 0 uses head a, the others head b; no rank uses `never`
        return (self.a if rank == 0 else self.b)(self.body(x))


torch.manual_seed(0)
model = Heads()
ddp = DistributedDataParallel(model, find_unused_parameters=True)
x = torch.arange(8.).reshape(2, 4) / (rank + 1)
ddp(x).square().sum().backward()
out = {name: p.grad.numpy() for name, p in model.named_parameters() if p.grad is not None}
out["never_is_none"] = np.array(model.never.weight.grad is None and model.never.bias.grad is None)
plain = DistributedDataParallel(Heads())
plain(x).sum().backward()
try:
    plain(x)
except RuntimeError as e:
    out["error"] = np.array(str(e))
np.savez(f"{sys.argv[1]}/rank{rank}.npz", **out)
"""


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_unused_parameters_as_pytorch(tmp_path, launcher):
    """find_unused_parameters: a head used on one rank gets that rank's gradient averaged on every rank, one no
    rank used keeps grad None; without it, the next forward raises PyTorch's RuntimeError."""
    _ok(_run(tmp_path, _UNUSED, 2, launcher=launcher))
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    ggrad.manual_seed(0)
    body, a, b, _ = (nn.Linear(4, 4) for _ in range(4))
    for r, head in ((0, a), (1, b)):
        head(body(ggrad.arange(8.).reshape(2, 4) / (r + 1))).square().sum().backward()
    want = {"a.weight": a.weight.grad.numpy() / 2, "b.weight": b.weight.grad.numpy() / 2,
            "body.weight": body.weight.grad.numpy() / 2, "b.bias": b.bias.grad.numpy() / 2}
    for got in ranks:
        assert bool(got["never_is_none"])
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
        assert "Expected to have finished reduction in the prior iteration" in str(got["error"])


_ERRORS = """
import datetime
import sys
import ggrad as torch
import ggrad.distributed as dist
from ggrad.utils.data.distributed import DistributedSampler


def outcome(call):
    try:
        call()
        return "ok"
    except Exception as e:
        return f"{type(e).__name__}: {e}"


lines = [outcome(dist.get_rank), outcome(dist.get_world_size), outcome(lambda: dist.all_reduce(torch.ones(2))),
         outcome(dist.barrier), outcome(lambda: dist.broadcast(torch.ones(1), 0)), outcome(dist.destroy_process_group),
         outcome(lambda: torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))),
         outcome(lambda: DistributedSampler(range(4))), outcome(lambda: dist.init_process_group("bogus")),
         outcome(lambda: dist.init_process_group("gloo")), str(dist.is_initialized())]
print("\\n".join(lines))
"""


def test_errors_before_init_process_group_are_pytorchs(tmp_path):
    pytest.importorskip("torch")
    proc = _run(tmp_path, _ERRORS)
    _ok(proc)
    torch_proc = _run(tmp_path, _ERRORS.replace("import ggrad as torch", "import torch").replace(
        "ggrad.distributed", "torch.distributed").replace("ggrad.utils", "torch.utils"))
    _ok(torch_proc)
    ours, theirs = proc.stdout.splitlines(), torch_proc.stdout.splitlines()
    assert len(ours) == len(theirs) == 11
    for a, b in zip(ours, theirs):
        assert a.split(":")[0] == b.split(":")[0], (a, b)     # the same exception type
    for a, b in zip(ours[:8] + ours[10:], theirs[:8] + theirs[10:]):
        assert a == b                                           # and the same words
    assert "RANK expected, but not set" in ours[9]


_INIT = """
import sys
import ggrad.distributed as dist
lines = []   # written at once: the ranks share one pipe, and a single short write is not interleaved
try:
    dist.init_process_group(sys.argv[2], **({"rank": int(sys.argv[3])} if len(sys.argv) > 3 else {}))
    lines.append(f"ok {dist.get_rank()} {dist.get_world_size()} {dist.get_backend()}")
    try:
        dist.init_process_group("gloo")
    except ValueError as e:
        lines.append(f"twice: {e}")
except Exception as e:
    lines.append(f"{type(e).__name__}: {e}")
sys.stdout.write("".join(line + "\\n" for line in lines))
sys.stdout.flush()
"""


@needs_mpi
def test_what_init_process_group_honours(tmp_path):
    """mpiexec's ranks (torchrun's variables agreeing), one process with RANK=0 WORLD_SIZE=1; a world of 2
    without MASTER_ADDR, or a rank other than MPI's, is refused saying why."""
    proc = _run(tmp_path, _INIT, 2, ["nccl"], env=_env(WORLD_SIZE="2"))
    _ok(proc)
    ranks = sorted(line for line in proc.stdout.split("\n") if line.startswith("ok"))
    assert ranks == ["ok 0 2 nccl", "ok 1 2 nccl"], proc.stdout
    assert proc.stdout.count("twice: trying to initialize the default process group twice!") == 2
    single = _run(tmp_path, _INIT, None, ["mpi"], env=_env(RANK="0", WORLD_SIZE="1", MASTER_ADDR="localhost",
                                                           MASTER_PORT="29500", LOCAL_RANK="0"))
    assert single.stdout.startswith("ok 0 1 mpi"), single.stdout + single.stderr
    bogus = _run(tmp_path, _INIT, None, ["bogus"], env=_env(RANK="0", WORLD_SIZE="1"))
    assert bogus.stdout == "AssertionError: Unknown backend type bogus\n", bogus.stdout + bogus.stderr   # PyTorch's
    torchrun = _run(tmp_path, _INIT, None, ["gloo"], env=_env(RANK="1", WORLD_SIZE="2"))
    assert torchrun.stdout == "ValueError: Error initializing torch.distributed using env:// rendezvous: environment " \
        "variable MASTER_ADDR expected, but not set\n", torchrun.stdout   # PyTorch's words
    wrong = _run(tmp_path, _INIT, 2, ["gloo", "0"])
    assert "ValueError: init_process_group: rank 0 (argument or environment) but MPI started this process as " \
           "rank 1 of 2" in wrong.stdout, wrong.stdout + wrong.stderr
