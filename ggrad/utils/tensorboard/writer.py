"""`SummaryWriter`: scalars, histograms and text written as TensorBoard event files, as PyTorch's writer writes them.

The records are tensorboard's own protocol buffers, written by its EventFileWriter; values may be Tensors,
numpy arrays or numbers (a Tensor is read back from its device).
"""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime
from typing import Any

import numpy as np

from ...autograd import Tensor

try:
    from tensorboard.compat.proto import types_pb2
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
except ImportError as e:   # an optional extra
    raise ImportError("ggrad.utils.tensorboard needs the tensorboard package: pip install tensorboard "
                      "(or ggrad[tensorboard])") from e

__all__ = ["SummaryWriter"]


def _numpy(value):
    if isinstance(value, Tensor):
        return value.detach().numpy()
    return np.asarray(value)


def _scalar(value, tag):
    array = _numpy(value)
    if array.size != 1:
        raise ValueError(f"add_scalar({tag!r}): expected one value, got shape {array.shape}")
    return float(array.reshape(()))


def tensorflow_bins():
    """TensorFlow's default histogram bucket edges: +-1e-12 growing by 10% up to 1e20, and 0."""
    edges, v = [], 1e-12
    while v < 1e20:
        edges.append(v)
        v *= 1.1
    return [-e for e in reversed(edges)] + [0.0] + edges


def histogram(values, bins="tensorflow", max_bins=None) -> HistogramProto:
    """A HistogramProto of `values`: count, sum, sum of squares, min, max, and the buckets from the first to the
    last nonempty one (`bins` as numpy's histogram takes them, or "tensorflow")."""
    values = _numpy(values).astype(np.float64).ravel()
    if values.size == 0:
        raise ValueError("add_histogram: the input has no element")
    counts, edges = np.histogram(values, bins=tensorflow_bins() if bins == "tensorflow" else bins)
    if max_bins is not None and len(counts) > max_bins:
        group = -(-len(counts) // max_bins)
        pad = (-len(counts)) % group
        counts = np.pad(counts, (0, pad)).reshape(-1, group).sum(axis=1)
        edges = np.concatenate([edges[:-1:group], edges[-1:]])
    used = np.flatnonzero(counts)
    first, last = used[0], used[-1]
    return HistogramProto(min=values.min(), max=values.max(), num=values.size, sum=values.sum(),
                          sum_squares=float(values @ values), bucket_limit=edges[first + 1:last + 2].tolist(),
                          bucket=counts[first:last + 1].tolist())


class SummaryWriter:
    """Writes TensorBoard events to `log_dir` (default: runs/<date>_<host><comment>), as PyTorch's SummaryWriter.

    Args:
        log_dir (str or None): the run's directory.
        comment (str): appended to the default log_dir.
        purge_step (int or None): TensorBoard drops events of a crashed run at or after this step.
        max_queue (int): events held before a write. Default: 10.
        flush_secs (int): seconds between flushes. Default: 120.
        filename_suffix (str): appended to the event file's name.
    """

    def __init__(self, log_dir: str | None = None, comment: str = "", purge_step: int | None = None,
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = "") -> None:
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir, self.purge_step = str(log_dir), purge_step
        self._options = dict(max_queue_size=max_queue, flush_secs=flush_secs, filename_suffix=filename_suffix)
        self._writer = self._open(self.log_dir)
        self._children = {}   # add_scalars' writers, one per sub-tag

    def _open(self, path):
        writer = EventFileWriter(path, **self._options)
        if self.purge_step is not None:
            writer.add_event(Event(step=self.purge_step, session_log=SessionLog(status=SessionLog.START)))
        return writer

    def get_logdir(self) -> str:
        return self.log_dir

    def _add(self, value, global_step, walltime, writer=None):
        event = Event(wall_time=time.time() if walltime is None else walltime, summary=Summary(value=[value]))
        if global_step is not None:
            event.step = int(global_step)
        (writer or self._writer).add_event(event)

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None,
                   walltime: float | None = None, new_style: bool = False, double_precision: bool = False) -> None:
        """One value (a number, or a one-element Tensor or array) of the curve `tag` at `global_step`."""
        value = _scalar(scalar_value, tag)
        if new_style:
            tensor = TensorProto(dtype=types_pb2.DT_DOUBLE if double_precision else types_pb2.DT_FLOAT,
                                 tensor_shape=TensorShapeProto())
            (tensor.double_val if double_precision else tensor.float_val).append(value)
            metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
            self._add(Summary.Value(tag=tag, tensor=tensor, metadata=metadata), global_step, walltime)
        else:
            self._add(Summary.Value(tag=tag, simple_value=value), global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict[str, Any], global_step: int | None = None,
                    walltime: float | None = None) -> None:
        """Several curves in one chart: each `tag` goes to its own run directory `<log_dir>/<main_tag>_<tag>`."""
        walltime = time.time() if walltime is None else walltime
        for tag, value in tag_scalar_dict.items():
            path = os.path.join(self.log_dir, f"{main_tag.replace('/', '_')}_{tag}")
            if path not in self._children:
                self._children[path] = self._open(path)
            self._add(Summary.Value(tag=main_tag, simple_value=_scalar(value, main_tag)), global_step, walltime,
                      self._children[path])

    def add_histogram(self, tag: str, values: Any, global_step: int | None = None, bins: Any = "tensorflow",
                      walltime: float | None = None, max_bins: int | None = None) -> None:
        """The distribution of `values` (a Tensor, array or sequence) at `global_step`."""
        self._add(Summary.Value(tag=tag, histo=histogram(values, bins, max_bins)), global_step, walltime)

    def add_text(self, tag: str, text_string: str, global_step: int | None = None,
                 walltime: float | None = None) -> None:
        """A piece of (markdown) text at `global_step`."""
        tensor = TensorProto(dtype=types_pb2.DT_STRING, string_val=[text_string.encode("utf-8")],
                             tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
        metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
        self._add(Summary.Value(tag=f"{tag}/text_summary", tensor=tensor, metadata=metadata), global_step, walltime)

    def flush(self) -> None:
        for writer in [self._writer, *self._children.values()]:
            writer.flush()

    def close(self) -> None:
        for writer in [self._writer, *self._children.values()]:
            writer.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
