"""`ggrad.utils.tensorboard.SummaryWriter` writes what PyTorch's SummaryWriter writes, as tensorboard reads it back:
scalars (with Tensor values), add_scalars' runs, histograms, text, purge_step. Skipped without tensorboard
(an optional extra)."""

import os

import numpy as np
import pytest

import ggrad

pytest.importorskip("tensorboard")
torch = pytest.importorskip("torch")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from torch.utils.tensorboard import SummaryWriter as TorchWriter  # noqa: E402

from ggrad.utils.tensorboard import SummaryWriter  # noqa: E402


def _write(writer_cls, lib, path):
    with writer_cls(path) as w:
        for step in range(3):
            w.add_scalar("loss", lib.tensor(1.0 / (step + 1)), step)
            w.add_scalar("lr", 0.1 * step, global_step=step, walltime=1000.0 + step)
            w.add_scalars("acc", {"train": 0.5 + step / 10, "val": lib.tensor([0.4 + step / 10])}, step)
        w.add_histogram("weights", lib.tensor(np.linspace(-2, 3, 101, dtype=np.float32)), 7)
        w.add_text("note", "hello **world**", 2)


def _read(path):
    events = EventAccumulator(str(path), size_guidance={"tensors": 0, "histograms": 0, "scalars": 0})
    events.Reload()
    return events


def test_the_same_records_as_pytorchs_writer(tmp_path):
    _write(SummaryWriter, ggrad, tmp_path / "ours")
    _write(TorchWriter, torch, tmp_path / "theirs")
    ours, theirs = _read(tmp_path / "ours"), _read(tmp_path / "theirs")
    assert ours.Tags()["scalars"] == theirs.Tags()["scalars"] == ["loss", "lr"]
    for tag in ("loss", "lr"):
        a, b = ours.Scalars(tag), theirs.Scalars(tag)
        assert [(e.step, pytest.approx(e.value)) for e in a] == [(e.step, e.value) for e in b]
    assert [e.wall_time for e in ours.Scalars("lr")] == [1000.0, 1001.0, 1002.0]
    for run in ("acc_train", "acc_val"):
        a, b = _read(tmp_path / "ours" / run).Scalars("acc"), _read(tmp_path / "theirs" / run).Scalars("acc")
        assert [(e.step, pytest.approx(e.value)) for e in a] == [(e.step, e.value) for e in b]
    h_ours, h_theirs = ours.Histograms("weights")[0], theirs.Histograms("weights")[0]
    assert h_ours.step == h_theirs.step == 7
    for field in ("min", "max", "num", "sum", "sum_squares"):
        assert getattr(h_ours.histogram_value, field) == pytest.approx(getattr(h_theirs.histogram_value, field))
    assert sum(h_ours.histogram_value.bucket) == 101
    text_ours, text_theirs = ours.Tensors("note/text_summary")[0], theirs.Tensors("note/text_summary")[0]
    assert text_ours.tensor_proto.string_val == text_theirs.tensor_proto.string_val == [b"hello **world**"]


def test_defaults_purge_step_and_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_exp")
    assert w.get_logdir().startswith("runs") and w.get_logdir().endswith("_exp")
    w.close()
    with SummaryWriter(tmp_path / "p", purge_step=5) as w:
        w.add_scalar("x", 1.0, 6)
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path / "p"))
    with pytest.raises(ValueError, match="one value"):
        SummaryWriter(tmp_path / "q").add_scalar("x", ggrad.ones(2), 0)
    with pytest.raises(ValueError, match="no element"):
        SummaryWriter(tmp_path / "r").add_histogram("h", np.zeros(0), 0)
