"""optim tests: a known random state, and one GGML thread.

The graphs here are tiny (a few thousand flops): on a 2-core machine GGML's CPU thread pool costs far
more than it saves (measured 40-200 ms per step with 2 threads against 1.6 ms with one; reported to
the lead), so these tests use one thread and restore the setting afterwards.
"""

import pytest

import ggrad


@pytest.fixture(autouse=True)
def _seed_and_one_thread():
    ggrad.manual_seed(0)
    threads = ggrad.get_num_threads()
    ggrad.set_num_threads(1)
    try:
        yield
    finally:
        ggrad.set_num_threads(threads)
