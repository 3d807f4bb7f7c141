"""ggrad.save/load with .gguf: exact round trips of models, optimizers, training progress; damaged files."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from ggrad.autograd.factory import generator
from ggrad.autograd.raw import to_raw
from ggrad.ggml import gguf

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _bits(t):
    return to_raw(t).tobytes()


def _train(model, opt, steps, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = ggrad.tensor(rng.standard_normal((8, 6)).astype(np.float32))
        loss = ((model(x) + ggrad.randn(8, 3) * 0.1) ** 2).mean()  # randn: the run depends on the RNG state
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def _model():
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 3))


def test_training_resumes_bitwise_from_a_gguf_checkpoint(tmp_path):
    ggrad.manual_seed(3)
    model = _model()
    opt = ggrad.optim.AdamW(model.parameters(), lr=1e-2)
    _train(model, opt, 3, seed=0)
    path = tmp_path / "run.gguf"
    ggrad.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 3,
                "rng": generator().bit_generator.state}, path)
    expected = _train(model, opt, 2, seed=1)
    expected_weights = [_bits(p) for p in model.parameters()]

    ggrad.manual_seed(99)
    resumed = _model()
    opt2 = ggrad.optim.AdamW(resumed.parameters(), lr=1e-2)
    state = ggrad.load(path)
    resumed.load_state_dict(state["model"])
    opt2.load_state_dict(state["optimizer"])
    generator().bit_generator.state = state["rng"]
    assert state["step"] == 3
    assert _train(resumed, opt2, 2, seed=1) == expected
    assert [_bits(p) for p in resumed.parameters()] == expected_weights


def test_every_kind_of_value_round_trips_exactly(tmp_path):
    obj = {
        "f32": ggrad.randn(3, 4), "f16": ggrad.randn(2, 5).half(), "bf16": ggrad.randn(7).bfloat16(),
        "i32": ggrad.tensor([[1, -2], [2**31 - 1, -2**31]]), "q4_k": ggrad.quantize(ggrad.randn(2, 256), "q4_K"),
        "scalar": ggrad.tensor(2.5), "empty": ggrad.zeros(0, 3), "param": nn.Parameter(ggrad.ones(2)),
        "frozen": nn.Parameter(ggrad.ones(1), requires_grad=False), "leaf": ggrad.ones(2).requires_grad_(),
        "u32": np.arange(6, dtype=np.uint32).reshape(2, 3), "bool": np.array([True, False]),
        "c64": np.array([1 + 2j], np.complex64), "big_endian": np.arange(3, dtype=">f8"),
        "f64_5d": np.ones((1, 2, 1, 2, 1)), "np_scalar": np.float16(0.5), "np_int": np.int64(-7),
        "ints": [1, 2, 3], "floats": (0.1, float("inf"), float("nan")), "strs": ["a", "b"], "bools": [True],
        "mixed": [1, "a", None, 2.5, [], (), {}], "keys": {1: "int", 2.5: "float", True: "bool", None: "none"},
        "big": 2**100, "negative_big": -2**70, "nul": "a\0b", "unicode": "ünï", "none": None, "flag": False,
        "deep": {"a": [{"b": (1, [2.0, {"c": ggrad.ones(1)}])}]},
    }
    path = tmp_path / "all.gguf"
    ggrad.save(obj, path)
    back = ggrad.load(path)
    assert back.keys() == obj.keys()
    for key in ("f32", "f16", "bf16", "i32", "q4_k", "scalar", "empty", "param", "frozen", "leaf"):
        a, b = obj[key], back[key]
        assert (type(b), b.dtype, b.shape, b.requires_grad) == (type(a), a.dtype, a.shape, a.requires_grad), key
        assert _bits(a) == _bits(b), key
    for key in ("u32", "bool", "c64", "big_endian", "f64_5d", "np_scalar", "np_int"):
        assert type(back[key]) is type(obj[key]) and back[key].dtype == obj[key].dtype, key
        assert np.asarray(back[key]).tobytes() == np.asarray(obj[key]).tobytes(), key
    rest = [k for k in obj if not isinstance(obj[k], (ggrad.Tensor, np.ndarray, np.generic)) and k != "deep"]
    for key in rest:
        assert repr(back[key]) == repr(obj[key]) and type(back[key]) is type(obj[key]), key
    assert back["deep"]["a"][0]["b"][1][1]["c"].tolist() == [1.0]


def test_file_is_ordinary_gguf_with_named_tensors_and_typed_metadata(tmp_path):
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    path = tmp_path / "m.gguf"
    ggrad.save({"model": model.state_dict(), "step": 12, "lr": 0.5, "name": "run", "betas": (0.9, 0.99)}, path)
    f = gguf.read(path)
    assert [t.name for t in f.tensors] == ["model.0.weight", "model.0.bias", "model.1.weight", "model.1.bias"]
    assert f.by_name["model.0.weight"].shape == (8, 4) and f.by_name["model.0.weight"].dtype.name == "f32"
    assert f.metadata["ggrad.value.step"] == 12 and f.metadata["ggrad.value.step"].dtype == np.int64
    assert f.metadata["ggrad.value.lr"] == 0.5 and f.metadata["ggrad.value.name"] == "run"
    assert f.metadata["ggrad.value.betas"].tolist() == [0.9, 0.99]
    assert json.loads(f.metadata["ggrad.structure"])["dict"][1] == ["step", {"kv": "ggrad.value.step"}]
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    long_key = {"x" * 80: ggrad.ones(1), "y" * 80: ggrad.ones(1)}
    ggrad.save(long_key, path)
    assert [t.name for t in gguf.read(path).tensors] == ["ggrad.tensor.0", "ggrad.tensor.1"]
    assert list(ggrad.load(path)) == list(long_key)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_quantized_tensors_kept_or_dequantized_on_request(tmp_path):
    q = ggrad.quantize(ggrad.randn(4, 64), "q8_0")
    ggrad.save({"q": q}, tmp_path / "q.gguf")
    kept = ggrad.load(tmp_path / "q.gguf")["q"]
    assert kept.dtype.name == "q8_0" and _bits(kept) == _bits(q)
    plain = ggrad.load(tmp_path / "q.gguf", dequantize=True)["q"]
    assert plain.dtype is ggrad.float32
    np.testing.assert_array_equal(plain.numpy(), q.dequantize().numpy())


def test_foreign_gguf_loads_as_a_dict_of_tensors_with_metadata(tmp_path, rng):
    w = rng.standard_normal((3, 32)).astype(np.float32)
    path = tmp_path / "other.gguf"
    gguf.write(path, {"general.architecture": "llama", "llama.block_count": np.uint32(2)},
               [("tok_embd.weight", "f32", [32, 3], w.view(np.uint8)),
                ("blk.0.attn_q.weight", "q4_0", [32, 3], ggrad.ggml.encode(w, "q4_0"))])
    tensors, meta = ggrad.load(path, metadata=True)
    assert list(tensors) == ["tok_embd.weight", "blk.0.attn_q.weight"]
    np.testing.assert_array_equal(tensors["tok_embd.weight"].numpy(), w)
    assert tensors["blk.0.attn_q.weight"].dtype.name == "q4_0"
    assert meta == {"general.architecture": "llama", "llama.block_count": 2}
    deq = ggrad.load(path, dequantize=True)["blk.0.attn_q.weight"]
    np.testing.assert_array_equal(deq.numpy(), ggrad.ggml.decode(ggrad.ggml.encode(w, "q4_0"), "q4_0", (3, 32)))


def test_npz_still_works_and_suffix_decides(tmp_path):
    ggrad.save({"w": ggrad.ones(2)}, tmp_path / "a.npz")
    assert ggrad.load(tmp_path / "a.npz")["w"].tolist() == [1.0, 1.0]
    os.replace(tmp_path / "a.npz", tmp_path / "renamed.gguf")
    with pytest.raises(ValueError, match="not a GGUF file"):
        ggrad.load(tmp_path / "renamed.gguf")


def test_damaged_tensor_data_fails_its_checksum(tmp_path):
    path = tmp_path / "c.gguf"
    ggrad.save({"w": ggrad.ones(64)}, path)
    data = bytearray(path.read_bytes())
    data[gguf.read(path).by_name["w"].offset + 5] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(ggrad.ggml.FormatError, match="CRC-32"):
        ggrad.load(path)


# Every truncation (each 7th byte), 400 random byte flips and a few huge counts of a real checkpoint:
# load either works or raises FormatError; any other exception or a crash fails.
_FUZZ = """
import struct, sys
import numpy as np
import ggrad, ggrad.nn as nn
ggrad.ggml.hooks.set_log_level("none")
path, out = sys.argv[1], sys.argv[2]
model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 32))
opt = ggrad.optim.AdamW(model.parameters())
ggrad.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 5, "names": ["a", "b"],
            "q": ggrad.quantize(ggrad.randn(2, 32), "q4_0")}, path)
good = open(path, "rb").read()
rng = np.random.default_rng(0)
cases = [good[:n] for n in range(0, len(good), 7)]
for _ in range(400):
    bad = bytearray(good)
    bad[rng.integers(len(good))] = rng.integers(256)
    cases.append(bytes(bad))
for offset in (8, 16, 24, 32):           # n_tensors, n_kv, first key's length, first value's type/length
    for value in (2**62, 2**63 - 1, -1):
        bad = bytearray(good)
        bad[offset:offset + 8] = struct.pack("<q", value)
        cases.append(bytes(bad))
counts = {"ok": 0, "FormatError": 0}
for data in cases:
    open(out, "wb").write(data)
    try:
        ggrad.load(out)
        counts["ok"] += 1
    except ggrad.ggml.FormatError:
        counts["FormatError"] += 1
print(len(cases), counts["ok"], counts["FormatError"])
"""


def test_fuzzed_checkpoints_never_crash_in_a_subprocess(tmp_path):
    result = subprocess.run([sys.executable, "-c", _FUZZ, str(tmp_path / "good.gguf"), str(tmp_path / "bad.gguf")],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    n, ok, errors = (int(v) for v in result.stdout.split())
    assert ok + errors == n and errors > n // 2, result.stdout
