"""The per-device BufferPool under threads: Blocks die in whichever thread drops them last (dp_train
computes each replica in a thread of its own), so `take` and `give` race on the free lists and counts."""

import sys
import threading

import pytest

import ggrad.ggml as gg
from ggrad.autograd.memory import Block, BufferPool

_SIZES = (256, 512, 1024)


@pytest.fixture
def fast_switching():
    """Switch threads every microsecond, so that unguarded read-modify-writes interleave."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _churn(pool, rounds, errors):
    try:
        for i in range(rounds):
            held = [pool.take(_SIZES[(i + k) % len(_SIZES)]) for k in range(4)]
            for buffer in held:
                pool.give(buffer)
    except BaseException as e:   # reported by the main thread
        errors.append(e)


def test_take_and_give_from_threads_keep_the_pool_whole(fast_switching):
    pool = BufferPool(gg.cpu())
    errors = []
    threads = [threading.Thread(target=_churn, args=(pool, 1500, errors)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert pool.in_use == 0
    kept = [b for bucket in pool.free.values() for b in bucket]
    assert len({id(b) for b in kept}) == len(kept), "a buffer was handed back twice"
    assert pool.bytes == sum(b.size for b in kept)
    assert all(b.size == size for size, bucket in pool.free.items() for b in bucket)
    pool.clear()
    assert pool.bytes == 0 and not pool.free


def test_blocks_dying_in_other_threads_return_their_buffers(fast_switching):
    pool = BufferPool(gg.cpu())
    blocks = [Block(pool.take(_SIZES[i % 3]), pool) for i in range(600)]
    taken = pool.in_use
    assert taken == sum(_SIZES[i % 3] for i in range(600))
    chunks = [blocks[i::4] for i in range(4)]
    del blocks

    def drop(chunk):
        while chunk:
            chunk.pop()   # the Block's __del__ gives its buffer back here

    threads = [threading.Thread(target=drop, args=(c,)) for c in chunks]
    for t in threads:
        t.start()
    for _ in range(300):   # the main thread takes and gives meanwhile
        pool.give(pool.take(2048))   # a size the Blocks do not use
    for t in threads:
        t.join()
    assert pool.in_use == 0
    assert pool.bytes == taken + 2048


class _SwitchingBuffer:
    """A buffer whose first `size` read runs `switch` first: another thread gets the pool at the worst
    moment of `give` (between reading the count and storing it back)."""

    def __init__(self, size):
        self._size = size
        self.switch = None

    @property
    def size(self):
        switch, self.switch = self.switch, None
        if switch is not None:
            switch()
        return self._size

    def free(self):
        pass


def test_a_thread_switch_inside_give_loses_no_update():
    pool = BufferPool(gg.cpu())
    other = pool.take(256)
    odd = _SwitchingBuffer(512)
    pool.free[512], pool.bytes = [odd], 512
    assert pool.take(512) is odd and pool.in_use == 768
    done = threading.Event()
    rival = threading.Thread(target=lambda: (pool.give(other), done.set()))

    def switch():   # the rival gives its buffer back while this thread is inside give
        rival.start()
        done.wait(0.5)   # with the pool locked it cannot get in: it waits, then finishes after

    odd.switch = switch
    pool.give(odd)
    rival.join()
    assert pool.in_use == 0
    assert pool.bytes == 768 and sorted(pool.free) == [256, 512]


def test_clear_frees_the_kept_buffers_but_not_those_handed_out():
    pool = BufferPool(gg.cpu())
    out = pool.take(1024)
    pool.give(pool.take(256))
    assert pool.bytes == 256
    pool.clear()
    assert pool.bytes == 0 and not pool.free
    assert pool.in_use == 1024
    pool.give(out)
    assert pool.bytes == 1024
    assert pool.take(1024) is out
