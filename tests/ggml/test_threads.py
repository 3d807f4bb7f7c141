"""The CPU thread policy: physical cores, work estimates, load from /proc/stat, the overrides. No timing."""

import os
import subprocess
import sys

import numpy as np
import pytest

import ggrad
import ggrad.ggml as gg
from ggrad.ggml import lib, threads


@pytest.fixture
def restore_threads():
    before = threads.policy.fixed
    yield
    gg.set_num_threads(before)


# ---------------------------------------------------------------- cores

def _fake_topology(root, siblings):
    """A /sys/devices/system/cpu tree where cpu i's core holds the CPUs `siblings[i]`."""
    for cpu, sib in enumerate(siblings):
        d = root / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "core_cpus_list").write_text(sib + "\n")


def test_physical_cores_counts_hyperthreads_once(tmp_path):
    _fake_topology(tmp_path, ["0,2", "1,3", "0,2", "1,3"])
    no_quota = tmp_path / "none"
    assert threads.physical_cores(range(4), sys_cpu=tmp_path, cgroup_cpu_max=no_quota) == 2
    assert threads.physical_cores([0, 2], sys_cpu=tmp_path, cgroup_cpu_max=no_quota) == 1
    assert threads.physical_cores([0, 1], sys_cpu=tmp_path, cgroup_cpu_max=no_quota) == 2


def test_physical_cores_without_topology_counts_cpus(tmp_path):
    assert threads.physical_cores([0, 1, 5], sys_cpu=tmp_path, cgroup_cpu_max=tmp_path / "none") == 3


def test_physical_cores_within_a_cgroup_quota(tmp_path):
    _fake_topology(tmp_path, [str(i) for i in range(8)])
    quota = tmp_path / "cpu.max"
    quota.write_text("150000 100000\n")
    assert threads.physical_cores(range(8), sys_cpu=tmp_path, cgroup_cpu_max=quota) == 2
    quota.write_text("max 100000\n")
    assert threads.physical_cores(range(8), sys_cpu=tmp_path, cgroup_cpu_max=quota) == 8


@pytest.mark.parametrize("text, expected", [("200000 100000", 2), ("50000 100000", 1), ("max 100000", None),
                                            ("", None), ("garbage", None), ("1 0", None)])
def test_cgroup_cpus(tmp_path, text, expected):
    path = tmp_path / "cpu.max"
    path.write_text(text)
    assert threads.cgroup_cpus(path) == expected


# ---------------------------------------------------------------- load

_STAT = """cpu  300 0 30 600 10 0 5 5 0 0
cpu0 100 0 10 200 5 0 2 3 0 0
cpu1 200 0 20 400 5 0 3 2 0 0
intr 12345
"""


def test_busy_ticks_leave_out_idle_and_iowait():
    assert threads.busy_ticks(_STAT, {"cpu0"}) == 100 + 10 + 2 + 3
    assert threads.busy_ticks(_STAT, {"cpu0", "cpu1"}) == 115 + 225
    assert threads.busy_ticks(_STAT, {"cpu7"}) == 0


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _stat_with(cpu0_user, cpu1_user):
    return f"cpu0 {cpu0_user} 0 0 1000 0 0 0 0 0 0\ncpu1 {cpu1_user} 0 0 1000 0 0 0 0 0 0\n"


def test_busy_meter_subtracts_this_process(tmp_path):
    stat = tmp_path / "stat"
    clock, own = _Clock(), _Clock()
    meter = threads.BusyMeter([0, 1], stat_path=stat, clock=clock, own_cpu=own)
    meter.ticks_per_s = 100
    stat.write_text(_stat_with(0, 0))
    assert meter.sample() == 0.0          # no interval yet: assume idle
    # one second later: the two CPUs were busy 1.5 s, 0.5 s of it this process's
    clock.now, own.now = 1.0, 0.5
    stat.write_text(_stat_with(100, 50))
    assert meter.sample() == pytest.approx(1.0)
    # within the interval the last estimate stands, whatever the file says
    clock.now = 1.0 + threads.LOAD_INTERVAL_S / 2
    stat.write_text(_stat_with(500, 500))
    assert meter.sample() == pytest.approx(1.0)
    # this process alone kept both CPUs busy: no load from others
    clock.now, own.now = 2.0, 2.5
    stat.write_text(_stat_with(150, 200))
    assert meter.sample() == pytest.approx(0.0)


def test_busy_meter_without_proc_stat_reports_idle(tmp_path):
    meter = threads.BusyMeter([0], stat_path=tmp_path / "missing")
    assert meter.sample() == 0.0
    assert meter.sample() == 0.0


# ---------------------------------------------------------------- choosing

@pytest.mark.parametrize("work_per_thread, limit, others, expected", [
    (100, 4, 0.0, 4),       # plenty of work, idle machine: every core
    (0.5, 4, 0.0, 1),       # too little work for a second thread
    (2.5, 4, 0.0, 2),       # work for two
    (100, 2, 0.7, 1),       # a busy process on one of two cores
    (100, 2, 0.4, 2),       # light load leaves the core
    (100, 8, 3.0, 5),
    (100, 2, 5.0, 1),       # never fewer than one
])
def test_choose(work_per_thread, limit, others, expected):
    assert threads.choose(work_per_thread * threads.NS_PER_THREAD, limit, others) == expected


class _Meter:
    def __init__(self, others):
        self.others, self.samples = others, 0

    def sample(self):
        self.samples += 1
        return self.others


def _graph(build):
    """A graph of the node `build(ctx)` returns (not allocated: only its shape matters)."""
    ctx = gg.Context(n_tensors=8)
    out = build(ctx)
    graph = gg.Graph(size=16)
    graph.build_forward_expand(out)
    return ctx, graph


def _matmul(n):
    def build(ctx):
        a = ctx.new_tensor(gg.f32, (n, n))
        b = ctx.new_tensor(gg.f32, (n, n))
        return gg.GTensor(lib.ggml_mul_mat(ctx.ptr, a.ptr, b.ptr), ctx)
    return _graph(build)


def _add(n):
    def build(ctx):
        a = ctx.new_tensor(gg.f32, (n,))
        return gg.GTensor(lib.ggml_add(ctx.ptr, a.ptr, a.ptr), ctx)
    return _graph(build)


def test_estimate_counts_multiply_adds_and_elements():
    _, graph = _matmul(256)
    assert threads.estimate_ns(graph.ptr) == pytest.approx(256 ** 3 * threads.NS_PER_MAC)
    _, graph = _add(1000)
    assert threads.estimate_ns(graph.ptr) == pytest.approx(1000 * threads.NS_PER_ELEMENT)


def test_estimate_counts_ggrads_matmul_kernel_as_a_product():
    from ggrad.ggml import kernels
    _, graph = _graph(lambda ctx: kernels.matmul_f32(ctx, ctx.new_tensor(gg.f32, (256, 128)),
                                                     ctx.new_tensor(gg.f32, (256, 64))))
    assert threads.estimate_ns(graph.ptr) == pytest.approx(128 * 64 * 256 * threads.NS_PER_MAC)


def test_estimate_of_a_large_graph_samples_its_nodes():
    """A chain of 200 equal adds (more nodes than MAX_NODES_READ): sampled, then scaled to the whole."""
    ctx = gg.Context(n_tensors=256)
    t = ctx.new_tensor(gg.f32, (1000,))
    for _ in range(200):
        t = gg.GTensor(lib.ggml_add(ctx.ptr, t.ptr, t.ptr), ctx)
    graph = gg.Graph(size=512)
    graph.build_forward_expand(t)
    assert graph.n_nodes == 200 > threads.MAX_NODES_READ
    exact = 200 * 1000 * threads.NS_PER_ELEMENT
    assert threads.estimate_ns(graph.ptr) == pytest.approx(exact, rel=0.05)
    assert threads.estimate_ns(graph.ptr, enough=exact / 10) < exact / 2   # stopped early


def test_policy_small_graph_gets_one_thread_without_reading_the_load():
    meter = _Meter(0.0)
    policy = threads.ThreadPolicy(limit=4, meter=meter)
    _, graph = _add(1000)
    assert policy.threads_for(graph.ptr) == 1
    assert meter.samples == 0


def test_policy_large_graph_gets_the_free_cores():
    _, graph = _matmul(1024)
    assert threads.ThreadPolicy(limit=4, meter=_Meter(0.0)).threads_for(graph.ptr) == 4
    assert threads.ThreadPolicy(limit=4, meter=_Meter(1.0)).threads_for(graph.ptr) == 3
    assert threads.ThreadPolicy(limit=1, meter=_Meter(0.0)).threads_for(graph.ptr) == 1


def test_policy_unknown_work_follows_the_load():
    assert threads.ThreadPolicy(limit=2, meter=_Meter(0.0)).threads_for(None) == 2
    assert threads.ThreadPolicy(limit=2, meter=_Meter(1.0)).threads_for(None) == 1


def test_policy_fixed_count_wins():
    _, tiny = _add(10)
    policy = threads.ThreadPolicy(limit=2, fixed=3, meter=_Meter(5.0))
    assert policy.threads_for(tiny.ptr) == 3
    assert policy.threads_for(None) == 3
    assert policy.max_threads == 3


def test_compute_uses_the_policy(restore_threads):
    """A step computed through the scheduler records the count chosen for it."""
    gg.set_num_threads(None)
    x = ggrad.tensor(np.ones((4, 4), np.float32))
    assert (x * 2 + 1).sum().item() == 48.0
    assert threads.policy.last == 1          # a tiny graph
    ggrad.set_num_threads(2)
    assert (x * 3).sum().item() == 48.0
    assert threads.policy.last == 2
    assert ggrad.get_num_threads() == 2


# ---------------------------------------------------------------- the environment variable

def _fresh(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True,
                          timeout=120, env=full)


def test_env_var_fixes_the_count():
    out = _fresh("import ggrad; print(ggrad.get_num_threads(), ggrad.ggml.threads.policy.fixed)",
                 GGRAD_NUM_THREADS="3")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "3"]


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_bad_env_var_warns_and_is_ignored(value):
    out = _fresh("import ggrad; print(ggrad.ggml.threads.policy.fixed)", GGRAD_NUM_THREADS=value)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None"]
    assert "GGRAD_NUM_THREADS" in out.stderr and "not a positive integer" in out.stderr


def test_fixed_from_env():
    assert threads.fixed_from_env({}) is None
    assert threads.fixed_from_env({"GGRAD_NUM_THREADS": " 4 "}) == 4
    with pytest.warns(RuntimeWarning, match="GGRAD_NUM_THREADS"):
        assert threads.fixed_from_env({"GGRAD_NUM_THREADS": "0"}) is None


# ---------------------------------------------------------------- build info

def test_build_info_reports_what_ggml_says():
    info = gg.build_info()
    assert info["version"] == gg.VERSION
    assert "CPU" in info["backends"]
    assert info["llamafile"] == bool(lib.ggml_cpu_has_llamafile())
    assert ("AVX2" in info["cpu_features"]) == bool(lib.ggml_cpu_has_avx2())
    assert ("RPC" in info["backends"]) == gg.has_backend("RPC")
    assert info["summary"].startswith(f"GGML {gg.VERSION}")
