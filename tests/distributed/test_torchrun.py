"""torchrun's rendezvous without MPI: TCPStore against PyTorch's, the socket transport's order-fixed float32
reductions, `python -m ggrad.distributed.run` as torchrun, and init_process_group's rules under torchrun's
variables (tcp:// and store=, a repeated rank, a rank that never comes, a lost rank)."""

import datetime
import subprocess
import sys
import threading

import numpy as np
import pytest

import ggrad.distributed as dist
from test_torch_facade import _COLLECTIVES, _env, _ok, _run, free_port, torchrun


def _store_session(lib):
    """The same calls on a master TCPStore and a client of it; what each returned or raised."""
    master = lib.TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=1), wait_for_workers=False)
    client = lib.TCPStore("127.0.0.1", master.port, None, False, timeout=datetime.timedelta(seconds=1))
    late = threading.Timer(0.2, lambda: master.set("late", b"\x00bytes"))
    late.start()
    out = [client.get("late"), master.set("k", "v"), client.get("k"), client.add("n", 3), master.add("n", -5),
           master.num_keys(), client.check(["k", "n"]), client.check(["k", "zz"]), client.delete_key("k"),
           client.delete_key("k"), client.compare_set("q", "", "x"), client.compare_set("q", "y", "z"),
           client.compare_set("q", "x", "z"), client.compare_set("absent", "e", "d"), master.num_keys()]
    client.wait(["n", "q"])
    for call in (lambda: client.wait(["nope"], datetime.timedelta(seconds=0.2)), lambda: master.get("nope2")):
        try:
            call()
        except RuntimeError as e:
            out.append((type(e).__name__, str(e).split("\n")[0]))
    late.join()
    return out


def test_tcp_store_as_pytorchs():
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available():
        pytest.skip("this PyTorch has no torch.distributed")
    assert _store_session(dist) == _store_session(torch.distributed)


def test_tcp_store_master_port_taken_and_no_master():
    store = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False)
    with pytest.raises(RuntimeError, match="failed to listen on port"):
        dist.TCPStore("127.0.0.1", store.port, None, True, wait_for_workers=False)
    with pytest.raises(dist.DistStoreError, match="no master"):
        dist.TCPStore("127.0.0.1", free_port(), None, False, timeout=datetime.timedelta(seconds=0.3))


_ORDER = """
import sys
import numpy as np
import ggrad as torch
import ggrad.distributed as dist
dist.init_process_group("gloo", init_method=sys.argv[2] if len(sys.argv) > 2 else None)
rank = dist.get_rank()
values = [np.array([1e8, 1.0, 0.1, -3.0], np.float32), np.array([1.0, 1e8, 0.2, 3.0], np.float32),
          np.array([-1e8, -1e8, 0.3, 1e-8], np.float32)]
total, mean = torch.tensor(values[rank]), torch.tensor(values[rank])
dist.all_reduce(total)
dist.all_reduce(mean, op=dist.ReduceOp.AVG)
np.savez(f"{sys.argv[1]}/rank{rank}.npz", total=total.numpy(), mean=mean.numpy())
dist.destroy_process_group()
"""


def _rank_order_sum():
    x = [np.array([1e8, 1.0, 0.1, -3.0], np.float32), np.array([1.0, 1e8, 0.2, 3.0], np.float32),
         np.array([-1e8, -1e8, 0.3, 1e-8], np.float32)]
    return (x[0] + x[1]) + x[2]


def test_reductions_are_the_rank_order_float32_sum_on_every_rank(tmp_path):
    _ok(_run(tmp_path, _ORDER, 3, launcher="torchrun"))
    want = _rank_order_sum()
    for rank in range(3):
        got = np.load(tmp_path / f"rank{rank}.npz")
        assert np.array_equal(got["total"], want)          # bit for bit: ((x0 + x1) + x2) in float32
        assert np.array_equal(got["mean"], want / np.float32(3))


def test_tcp_init_method_and_a_store_argument(tmp_path):
    """init_method="tcp://host:port" with rank= / world_size= given, and a TCPStore passed as store=."""
    port = free_port()
    _ok(_run(tmp_path, _ORDER, 3, [f"tcp://127.0.0.1:{port}"], launcher="torchrun"))
    assert np.array_equal(np.load(tmp_path / "rank2.npz")["total"], _rank_order_sum())
    script = """
import datetime, sys
import ggrad as torch
import ggrad.distributed as dist
rank = int(sys.argv[2])
store = dist.TCPStore("127.0.0.1", int(sys.argv[3]), 2, rank == 0, timeout=datetime.timedelta(seconds=60))
dist.init_process_group("nccl", store=store, rank=rank, world_size=2)
t = torch.tensor([float(rank + 1)])
dist.broadcast(t, src=1)
print(rank, dist.get_backend(), t.item())
"""
    path = tmp_path / "store.py"
    path.write_text(script)
    port = free_port()
    procs = [subprocess.Popen([sys.executable, str(path), str(tmp_path), str(r), str(port)], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert sorted(o for o, _ in outputs) == ["0 nccl 2.0\n", "1 nccl 2.0\n"]


_INIT = """
import datetime, sys
import ggrad as torch
import ggrad.distributed as dist
try:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(sys.argv[2])),
                            init_method=sys.argv[3] if len(sys.argv) > 3 else None)
    if sys.argv[2] == "9" and dist.get_rank() == 1:
        sys.exit(0)                      # a rank that leaves: the others' next collective reports it
    dist.all_reduce(torch.ones(2))
    print("ok")
except Exception as e:
    print(f"{type(e).__name__}: {e}")
"""


def test_init_rules_and_lost_ranks(tmp_path):
    path = tmp_path / "init.py"
    path.write_text(_INIT)
    command = [sys.executable, str(path), str(tmp_path)]
    repeated = torchrun(command + ["20"], 3, _env(), tmp_path, ranks=[0, 1, 1])
    assert "RuntimeError: init_process_group: a process joined as rank 1 of 3" in repeated.stdout, repeated
    absent = torchrun(command + ["2"], 2, _env(), tmp_path, ranks=[0, 5])   # rank 5 of 2 refuses to start
    assert "ValueError: init_process_group: rank 5 is not in [0, 1]" in absent.stdout, absent
    assert "DistStoreError" in absent.stdout or "RankLostError" in absent.stdout, absent   # rank 0 waits in vain
    lost = torchrun(command + ["9"], 3, _env(), tmp_path)
    assert lost.stdout.count("RankLostError") == 2 and "rank 1" in lost.stdout, lost
    bad = torchrun(command + ["5", "file:///tmp/x"], 1, _env(), tmp_path)
    assert bad.stdout == "ok\n", bad    # a world of one needs no rendezvous
    bad = torchrun(command + ["5", "file:///tmp/x"], 2, _env(), tmp_path)
    assert bad.stdout.count("ValueError: init_process_group: init_method 'file:///tmp/x'") == 2, bad


def test_launcher_runs_a_script_as_torchrun(tmp_path):
    (tmp_path / "script.py").write_text(_COLLECTIVES)
    proc = subprocess.run([sys.executable, "-m", "ggrad.distributed.run", "--standalone", "--nproc-per-node", "3",
                           str(tmp_path / "script.py"), str(tmp_path)], env=_env(), capture_output=True, text=True,
                          timeout=180, cwd=tmp_path)
    _ok(proc)
    for rank in range(3):
        got = np.load(tmp_path / f"rank{rank}.npz")
        assert np.array_equal(got["all_gather"], np.stack([np.full((2, 2), r) for r in range(3)]))


def test_launcher_stops_the_others_when_one_fails(tmp_path):
    (tmp_path / "fail.py").write_text("import os, sys, time\nif os.environ['RANK'] == '1':\n    sys.exit(3)\n"
                                      "time.sleep(120)\n")
    proc = subprocess.run([sys.executable, "-m", "ggrad.distributed.run", "--nproc_per_node=2",
                           f"--master_port={free_port()}", str(tmp_path / "fail.py")], env=_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 3, proc
    refused = subprocess.run([sys.executable, "-m", "ggrad.distributed.run", "--nnodes=2", str(tmp_path / "fail.py")],
                             env=_env(), capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "--nnodes must be 1" in refused.stderr
