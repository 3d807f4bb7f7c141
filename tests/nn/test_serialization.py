"""ggrad.serialization: round trips, state-dict checkpoints, atomic writes, clear errors for bad files."""

import io
import os
import zipfile

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from ggrad.serialization import load, save


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 8, padding_idx=0)
        self.block = nn.TransformerBlock(8, 2)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 11)
        self.register_buffer("calls", ggrad.zeros(1))

    def forward(self, ids):
        return self.head(self.norm(self.block(self.embed(ids))))


def test_state_dict_round_trip_gives_identical_outputs(tmp_path):
    ggrad.manual_seed(1)
    model = Model()
    ids = ggrad.tensor([[1, 4, 2, 0], [3, 3, 9, 10]])
    expected = model(ids).numpy()
    path = tmp_path / "model.ckpt"
    save(model.state_dict(), path)
    ggrad.manual_seed(2)
    fresh = Model()
    assert not np.allclose(fresh(ids).numpy(), expected)
    fresh.load_state_dict(load(path))
    np.testing.assert_array_equal(fresh(ids).numpy(), expected)


def test_nested_structures_round_trip(tmp_path):
    obj = {
        "step": 12, "lr": 3e-4, "name": "run-1", "done": False, "nothing": None, "inf": float("inf"),
        "f32": ggrad.randn(2, 3), "f16": ggrad.randn(4).half(), "i32": ggrad.arange(5), "scalar": ggrad.tensor(2.5),
        "bf16": ggrad.randn(3).to(ggrad.bfloat16),
        "array": np.arange(6, dtype=np.int64).reshape(2, 3), "mask": np.array([True, False]),
        "np_scalar": np.float32(1.5),
        "state": {0: {"exp_avg": ggrad.ones(2)}, 1: {"exp_avg": ggrad.zeros(3)}},
        "groups": [{"params": [0, 1], "betas": (0.9, 0.999)}],
    }
    save(obj, tmp_path / "x.npz")
    back = load(tmp_path / "x.npz")
    assert list(back) == list(obj)
    for key in ("step", "lr", "name", "done", "nothing", "inf"):
        assert back[key] == obj[key] and type(back[key]) is type(obj[key])
    for key in ("f32", "f16", "i32", "scalar", "bf16"):
        assert isinstance(back[key], ggrad.Tensor) and back[key].dtype is obj[key].dtype
        assert back[key].shape == obj[key].shape
        np.testing.assert_array_equal(back[key].numpy(), obj[key].numpy())
    np.testing.assert_array_equal(back["array"], obj["array"])
    assert back["array"].dtype == np.int64 and back["mask"].dtype == bool
    assert back["np_scalar"] == np.float32(1.5) and isinstance(back["np_scalar"], np.float32)
    assert list(back["state"]) == [0, 1]                               # int keys stay ints
    np.testing.assert_array_equal(back["state"][1]["exp_avg"].numpy(), np.zeros(3))
    assert back["groups"] == [{"params": [0, 1], "betas": (0.9, 0.999)}]


def test_parameters_and_requires_grad_survive(tmp_path):
    p = nn.Parameter(ggrad.randn(3))
    save({"p": p, "t": ggrad.randn(2, requires_grad=True)}, tmp_path / "p")
    back = load(tmp_path / "p")
    assert isinstance(back["p"], nn.Parameter) and back["p"].requires_grad
    assert not isinstance(back["t"], nn.Parameter) and back["t"].requires_grad


def test_file_objects(tmp_path):
    buf = io.BytesIO()
    save({"w": ggrad.ones(2)}, buf)
    buf.seek(0)
    np.testing.assert_array_equal(load(buf)["w"].numpy(), [1, 1])


def test_files_are_plain_npz_without_pickle(tmp_path):
    save({"w": ggrad.ones(2)}, tmp_path / "c.npz")
    with np.load(tmp_path / "c.npz", allow_pickle=False) as archive:
        assert sorted(archive.files) == ["__ggrad__", "a0"]


def test_interrupted_save_leaves_the_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    save({"version": 1, "w": ggrad.ones(3)}, path)
    original = path.read_bytes()

    def crash(file, **members):
        file.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        save({"version": 2, "w": ggrad.zeros(3)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == original
    assert os.listdir(tmp_path) == ["ckpt.npz"]                       # no temporary file left behind
    assert load(path)["version"] == 1

    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        save({"version": 3}, path)
    monkeypatch.undo()
    assert path.read_bytes() == original and os.listdir(tmp_path) == ["ckpt.npz"]


def test_bad_files_raise_value_error_naming_the_path(tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(os.urandom(256))
    with pytest.raises(ValueError, match=f"ggrad.load: {junk} is not a ggrad checkpoint"):
        load(junk)
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="empty.npz is not a ggrad checkpoint"):
        load(empty)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, x=np.ones(2))
    with pytest.raises(ValueError, match="foreign.npz is not a ggrad checkpoint .no __ggrad__ member"):
        load(foreign)
    good = tmp_path / "good.npz"
    save({"w": ggrad.randn(100, 100)}, good)
    cut = tmp_path / "truncated.npz"
    cut.write_bytes(good.read_bytes()[:20000])
    with pytest.raises(ValueError, match="truncated.npz"):
        load(cut)
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.npz")


def test_pickled_members_are_refused(tmp_path):
    sneaky = tmp_path / "sneaky.npz"
    good = tmp_path / "good.npz"
    save({"w": ggrad.ones(1)}, good)
    with np.load(good) as archive:
        members = {k: archive[k] for k in archive.files}
    members["a0"] = np.array([{"evil": 1}], dtype=object)            # would need pickle to load
    with zipfile.ZipFile(sneaky, "w"):
        pass
    np.savez(sneaky, **members)
    with pytest.raises(ValueError, match="sneaky.npz is corrupt"):
        load(sneaky)


def test_unpicklable_objects_are_named(tmp_path):
    with pytest.raises(TypeError, match="ggrad.save: cannot pickle dict"):
        save({"f": lambda: 1}, tmp_path / "m")
    assert not os.listdir(tmp_path)
