"""Variable-length batches for the recurrent layers, as torch.nn.utils.rnn: PackedSequence,
pack_padded_sequence, pad_packed_sequence, pack_sequence, pad_sequence, unpad_sequence.

A PackedSequence holds the real steps only, time-major: the rows of step t are the batch_sizes[t]
sequences still running at t, longest first. Packing and padding are one index_select each (with
host-made row positions), so gradients flow back to the padded input. Lengths and batch sizes are
host values (int64 tensors, as torch keeps them on the CPU). PyTorch's path: ggrad.nn.utils.rnn.
"""

from typing import NamedTuple, Optional

import numpy as np

from ...autograd import Tensor
from ...autograd.factory import full, tensor
from ...autograd.ops import cat, stack
from ...autograd.torch_dtypes import INT64


class PackedSequence(NamedTuple):
    """data (sum(lengths), *), batch_sizes (T,) int64, and the sort of the batch by decreasing length:
    sorted_indices[i] is the original batch index of sorted entry i; unsorted_indices inverts it."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Optional[Tensor] = None
    unsorted_indices: Optional[Tensor] = None


def _host_lengths(lengths):
    values = lengths.numpy() if isinstance(lengths, Tensor) else np.asarray(lengths)
    return values.astype(np.int64).reshape(-1)


def _long(values):
    return tensor(np.asarray(values, dtype=np.int64), INT64)


def _packed_rows(lengths_sorted, batch):
    """Row positions t * batch + b (in the (T * B) flattening) of the real steps, in packed order."""
    batch_sizes = np.array([(lengths_sorted > t).sum() for t in range(int(lengths_sorted[0]))], dtype=np.int64)
    rows = np.concatenate([t * batch + np.arange(n) for t, n in enumerate(batch_sizes)])
    return rows, batch_sizes


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):  # noqa: A002 (torch's names)
    """Pack a padded (T, B, *) batch (B, T, * with batch_first) whose sequence b has lengths[b] real steps.

    With enforce_sorted the lengths must decrease; otherwise the batch is sorted here and the order kept
    in sorted_indices / unsorted_indices."""
    lengths = _host_lengths(lengths)
    if enforce_sorted:
        if np.any(lengths[1:] > lengths[:-1]):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        order = None
    else:
        order = np.argsort(-lengths, kind="stable")
    x = input.transpose(0, 1) if batch_first else input
    if len(lengths) != x.shape[1]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                           f"(batch_size={x.shape[1]})")
    if lengths.size and lengths.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if lengths.max() > x.shape[0]:
        raise RuntimeError(f"pack_padded_sequence: a length of {int(lengths.max())} exceeds the input's "
                           f"{x.shape[0]} time steps")
    if order is not None:
        x, lengths = x.index_select(1, _long(order)), lengths[order]
    rows, batch_sizes = _packed_rows(lengths, x.shape[1])
    flat = x.reshape((x.shape[0] * x.shape[1],) + tuple(x.shape[2:]))
    data = flat.index_select(0, _long(rows))
    if order is None:
        return PackedSequence(data, _long(batch_sizes))
    return PackedSequence(data, _long(batch_sizes), _long(order), _long(np.argsort(order)))


def packed_lengths(sequence):
    """The sorted lengths of a PackedSequence's sequences (host int64), read from its batch sizes."""
    batch_sizes = _host_lengths(sequence.batch_sizes)
    return np.array([(batch_sizes > b).sum() for b in range(int(batch_sizes[0]))], dtype=np.int64)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The padded (T, B, *) batch (B, T, * with batch_first) of a PackedSequence, in the original batch
    order, and its lengths (int64); total_length pads T further."""
    lengths = packed_lengths(sequence)
    steps = int(lengths[0])
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
        steps = int(total_length)
    data, batch = sequence.data, len(lengths)
    rows, _ = _packed_rows(lengths, batch)
    source = np.full(steps * batch, data.shape[0], dtype=np.int64)   # the padding row, unless a real step
    source[rows] = np.arange(data.shape[0])
    padding = full((1,) + tuple(data.shape[1:]), float(padding_value), dtype=data.dtype, device=data.device)
    padded = cat([data, padding], 0).index_select(0, _long(source))
    padded = padded.reshape((steps, batch) + tuple(data.shape[1:]))
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices.numpy()]
    return (padded.transpose(0, 1) if batch_first else padded), _long(lengths)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences of shape (L_i, *) into (T, B, *) (B, T, * with batch_first), padded with
    padding_value on the right (or the left) up to the longest."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        short = longest - s.shape[0]
        if short:
            pad = full((short,) + tuple(s.shape[1:]), float(padding_value), dtype=s.dtype, device=s.device)
            s = cat([s, pad] if padding_side == "right" else [pad, s], 0)
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences (L_i, *) inside a padded (T, B, *) batch (B, T, * with batch_first)."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[b].narrow(0, 0, int(n)) for b, n in enumerate(_host_lengths(lengths))]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences (L_i, *) (decreasing lengths with enforce_sorted)."""
    return pack_padded_sequence(pad_sequence(sequences), [s.shape[0] for s in sequences],
                                enforce_sorted=enforce_sorted)
