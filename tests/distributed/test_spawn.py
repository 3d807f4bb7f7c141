"""torch.multiprocessing.spawn as PyTorch's DDP tutorial uses it (`import ggrad as torch`): the ranks set
MASTER_ADDR / MASTER_PORT and init_process_group(rank=, world_size=) meets them over TCP; their DDP training
equals one process on the full batch; a failing rank stops the others and raises PyTorch's exceptions."""

import subprocess
import sys

import numpy as np
import pytest

import ggrad
import ggrad.multiprocessing as mp
from test_torch_facade import _env, _ok, free_port

_TUTORIAL = """
import os
import sys
import numpy as np
import ggrad as torch
import ggrad.distributed as dist
import ggrad.multiprocessing as mp
import ggrad.nn as nn
import ggrad.optim as optim
from ggrad.nn.parallel import DistributedDataParallel as DDP


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = sys.argv[2]
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def cleanup():
    dist.destroy_process_group()


def demo_basic(rank, world_size, out):
    setup(rank, world_size)
    torch.manual_seed(rank)
    model = ToyModel()
    ddp_model = DDP(model)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 12, 10), np.float32), rng.standard_normal((3, 12, 5), np.float32)
    shard = slice(rank * 12 // world_size, (rank + 1) * 12 // world_size)
    for step in range(3):
        optimizer.zero_grad()
        loss_fn(ddp_model(torch.tensor(x[step, shard])), torch.tensor(y[step, shard])).backward()
        optimizer.step()
    np.savez(f"{out}/rank{rank}.npz", *[p.detach().numpy() for p in model.parameters()])
    if rank == int(sys.argv[3]):
        raise ValueError(f"rank {rank} fails on purpose")
    cleanup()


if __name__ == "__main__":
    try:
        mp.spawn(demo_basic, args=(int(sys.argv[4]), sys.argv[1]), nprocs=int(sys.argv[4]), join=True)
        print("joined")
    except mp.ProcessRaisedException as e:
        print(type(e).__name__, e.error_index, "ValueError: rank 1 fails on purpose" in str(e))
"""


def _one_process():
    ggrad.manual_seed(0)
    net1, net2 = ggrad.nn.Linear(10, 10), ggrad.nn.Linear(10, 5)
    model = ggrad.nn.Sequential(net1, ggrad.nn.ReLU(), net2)
    opt = ggrad.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 12, 10), np.float32), rng.standard_normal((3, 12, 5), np.float32)
    return model, opt, x, y


@pytest.mark.parametrize("world", [2, 3])
def test_spawned_ddp_tutorial_trains_as_one_process(tmp_path, world):
    (tmp_path / "tutorial.py").write_text(_TUTORIAL)
    proc = subprocess.run([sys.executable, str(tmp_path / "tutorial.py"), str(tmp_path), str(free_port()), "-1",
                           str(world)], env=_env(), capture_output=True, text=True, timeout=180, cwd=tmp_path)
    _ok(proc)
    assert proc.stdout == "joined\n"
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(world)]
    model, opt, x, y = _one_process()   # rank 0's initial weights (DDP broadcasts them): its seed is 0
    for step in range(3):
        opt.zero_grad()
        ggrad.nn.functional.mse_loss(model(ggrad.tensor(x[step])), ggrad.tensor(y[step])).backward()
        opt.step()
    for r in ranks:
        for k, p in zip(r.files, model.parameters()):
            np.testing.assert_allclose(r[k], p.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_failing_rank_raises_processraisedexception(tmp_path):
    (tmp_path / "tutorial.py").write_text(_TUTORIAL)
    proc = subprocess.run([sys.executable, str(tmp_path / "tutorial.py"), str(tmp_path), str(free_port()), "1", "2"],
                          env=_env(), capture_output=True, text=True, timeout=180, cwd=tmp_path)
    _ok(proc)
    assert proc.stdout == "ProcessRaisedException 1 True\n", proc.stdout + proc.stderr


def _exits(i, code):
    sys.exit(code)


def test_exit_codes_and_join_false():
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 7") as info:
        mp.spawn(_exits, args=(7,), nprocs=1, start_method="fork")
    assert info.value.exit_code == 7 and info.value.error_index == 0
    context = mp.spawn(_exits, args=(0,), nprocs=2, join=False, start_method="fork")
    assert context.join(timeout=60) and len(context.pids()) == 2
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system" and "file_descriptor" in mp.get_all_sharing_strategies()
    mp.set_sharing_strategy("file_descriptor")
    assert mp.Process is __import__("multiprocessing").Process and mp.cpu_count() >= 1
