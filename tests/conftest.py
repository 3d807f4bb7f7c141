"""Fixtures shared by every test package: allocated CPU tensors, free ports, resident memory."""

import os
import socket

import numpy as np
import pytest

import ggrad.ggml as gg


def _rss_bytes():
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def rss_bytes():
    """`rss_bytes()`: resident set size of this process, from /proc/self/statm."""
    return _rss_bytes


@pytest.fixture(scope="session")
def free_port():
    """`free_port()`: a TCP port on 127.0.0.1 that nothing listens on right now."""
    return _free_port


@pytest.fixture
def cpu_tensor():
    """`make(dtype, shape)`: a tensor of numpy-order `shape` in a CPU backend buffer.

    Returns (tensor, buffer); both live at least as long as the test.
    """
    keep = []

    def make(dtype, shape):
        ctx = gg.Context(n_tensors=1)
        t = ctx.new_tensor(dtype, tuple(reversed(shape)), name="t")
        buf = gg.alloc_context_tensors(ctx, gg.cpu().buffer_type)
        keep.append((ctx, buf))
        return t, buf

    yield make
    keep.clear()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
