"""nn tests start from a known random state.

`_no_cyclic_gc` works around an autograd bug (reported to the lead): when a realized Tensor dies inside
a reference cycle (tracebacks from pytest.raises make these), cffi frees its GGML buffer and then
`Block.__del__` returns that freed buffer to the pool, so a later compute crashes. With automatic
cyclic GC off during a test, and the pool dropped after collecting, no freed buffer is ever handed out.
Remove the fixture once execution.Block / BufferPool are fixed.
"""

import gc

import pytest

import ggrad
from ggrad.autograd import execution


@pytest.fixture(autouse=True)
def _seed():
    ggrad.manual_seed(0)


@pytest.fixture(autouse=True)
def _no_cyclic_gc():
    gc.collect()
    execution.reset_pools()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()
        execution.reset_pools()
