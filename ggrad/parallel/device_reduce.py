"""The gradient all-reduce of local replicas on their devices: GGML's copies between devices, and adds in
each replica's update graph, with no host round trip.

Each replica's weighted gradients are joined into flat float32 buckets of whole parameters (`bucket_ranges`),
computed by its backward graph. Then every replica pulls, in its own thread, each peer's buckets onto its
device as soon as that peer's backward has computed (`copy_to_device`: a peer copy between CUDA devices, a
memcpy between host buffers), and sums them in device order (replica 0's + replica 1's + ...) as nodes of
its update graph. Every replica adds the same float32 values in the same order with IEEE additions, which
every backend rounds alike, so the replicas receive bitwise identical sums, and stay identical.

Traffic: each device receives (N - 1) buckets' worth a step. For 2 devices that is what a ring all-reduce
moves (2 (N - 1) / N); from 3 devices on a ring would move less. The copies start only once the peer's
whole backward has computed: GGML computes a replica's step as one graph, with no point inside it where
a copy could start, so they overlap the other replicas' backward passes, not the replica's own.
"""

from ..autograd.device_copy import copy_to_device


def bucket_ranges(sizes, bucket_elems):
    """[(lo, hi)]: consecutive parameter index ranges whose element counts (`sizes`) add up to at most
    `bucket_elems` each (a larger parameter gets a bucket of its own)."""
    ranges, lo, filled = [], 0, 0
    for j, n in enumerate(sizes):
        if j > lo and filled + n > bucket_elems:
            ranges.append((lo, j))
            lo, filled = j, 0
        filled += n
    if lo < len(sizes):
        ranges.append((lo, len(sizes)))
    return ranges


def pulled(buckets, device):
    """One replica's computed `buckets` on `device` (as they are when already there, else copied there by
    GGML) and the bytes copied."""
    copied = 0
    out = []
    for bucket in buckets:
        if bucket.device == device:
            out.append(bucket)
        else:
            out.append(copy_to_device(bucket, device))
            copied += bucket.numel() * bucket.element_size()
    return out, copied


def summed(parts):
    """The sum of `parts` in their order: ((p0 + p1) + p2) + ... (pending nodes on their device)."""
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total
