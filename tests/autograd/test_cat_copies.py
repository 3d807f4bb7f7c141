"""cat of many parts copies each element about log2(parts) times (a join, GGML's concat or the CPU's kernel,
takes two tensors: the parts are joined pairwise, level by level), not up to parts - 1 times as a
left-to-right chain does (a gradient bucket of 52 parameters: 6 copies against 51 for the first)."""

import numpy as np

import ggrad


def test_cat_of_64_parts_copies_each_element_6_times():
    parts = [ggrad.tensor(np.full(1000, i, np.float32)) * 1.0 for i in range(64)]
    with ggrad.profile() as prof:
        out = ggrad.cat(parts).numpy()
    np.testing.assert_array_equal(out, np.repeat(np.arange(64, dtype=np.float32), 1000))
    concats = {shape: calls for (op, shape), (calls, _) in prof.records.items() if op in ("CONCAT", "CONCAT_F32")}
    assert sum(calls for calls in concats.values()) == 63
    written = sum(int(shape) * calls for shape, calls in concats.items())
    assert written == 6 * 64000   # a chain writes 2000 + 3000 + ... + 64000 = 2,079,000
