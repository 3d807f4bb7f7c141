"""`ggrad.stats()["memory"]`: per device compute buffer, persistent tensors, pooled buffers and the peak."""

import gc

import numpy as np

import ggrad
import ggrad.nn as nn
from ggrad import optim


def setup_function():
    ggrad.zeros(1).numpy()   # a device is listed once something was computed on it


def _cpu():
    return ggrad.stats()["memory"]["CPU"]


def test_held_results_count_as_persistent_until_dropped():
    a = ggrad.tensor(np.ones((512, 512), np.float32)).realize()
    x = (a * 2.0).realize()
    held = _cpu()["persistent"]
    del x
    assert held - _cpu()["persistent"] >= 512 * 512 * 4


def test_the_peak_covers_a_step_and_reset_stats_lowers_it():
    ggrad.realize()
    ggrad.reset_stats()
    a = ggrad.tensor(np.ones((256, 1024), np.float32))
    total = ((a * 3.0).exp() * a).sum()   # intermediates of 1 MiB each live in the compute buffer
    total.item()
    mem = _cpu()
    assert mem["compute_buffer"] >= 256 * 1024 * 4
    assert mem["peak"] >= mem["compute_buffer"] + 256 * 1024 * 4   # a's buffer was held during the compute
    del a, total
    ggrad.reset_stats()
    mem = _cpu()
    assert mem["peak"] == mem["persistent"] + mem["compute_buffer"] + mem["replay_buffers"]


def test_a_training_step_holds_parameters_moments_and_gradients():
    ggrad.set_graph_cache(False)   # no cached uploads of other tests freed meanwhile
    try:
        gc.collect()
        ggrad.realize()
        before = _cpu()["persistent"]
        model = nn.Linear(128, 128)
        opt = optim.AdamW(model.parameters(), lr=1e-3)
        loss = model(ggrad.tensor(np.ones((4, 128), np.float32))).square().mean()
        loss.backward()
        opt.step()
        loss.item()
    finally:
        ggrad.set_graph_cache(True)
    param_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert _cpu()["persistent"] - before >= 4 * param_bytes   # weights, two moments, gradients
    assert _cpu()["peak"] >= _cpu()["persistent"]
