"""AllReduceBucket without MPI: the parts, scaled by the share, land in one flat float32 bucket at their
offsets, bit for bit as numpy computes them, for every chain length of its custom nodes (9 inputs in the
first node, 8 in each further one); the `reduce` it is given sees that bucket, in place, once."""

import numpy as np
import pytest

import ggrad
from ggrad.autograd import no_grad
from ggrad.collectives.bucket import AllReduceBucket


@pytest.mark.parametrize("n_parts", [1, 9, 10, 17, 18, 30])
@pytest.mark.parametrize("share", [1.0, 0.3])
def test_the_bucket_is_the_scaled_parts_joined(n_parts, share):
    rng = np.random.default_rng(n_parts)
    shapes = [(3, 4), (5,), (), (2, 3, 2), (4, 3)]
    arrays = [rng.standard_normal(shapes[i % len(shapes)]).astype(np.float32) for i in range(n_parts)]
    parts = [ggrad.tensor(a) * 1.0 for a in arrays]
    parts[0] = ggrad.tensor(arrays[0].T.copy()).t()      # a transposed view arrives as its contiguous copy
    seen = []

    def reduce(bucket):   # the one rank's sum: doubled, so the test sees that the node's result is reduce's
        seen.append(bucket.copy())
        bucket *= 2

    with no_grad():
        total = AllReduceBucket.apply(*parts, share, reduce).numpy()
    joined = np.concatenate([a.reshape(-1) for a in arrays])
    expected = joined if share == 1.0 else joined * np.float32(share)
    assert len(seen) == 1 and np.array_equal(seen[0], expected)
    assert total.dtype == np.float32 and np.array_equal(total, 2 * expected)
