"""Interop with PyPI's `gguf` package (GGML's own Python reader/writer; the `test` extra installs it)."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn

gguf_py = pytest.importorskip("gguf")
Q = gguf_py.GGMLQuantizationType


def test_a_saved_model_reads_in_gguf_reader(tmp_path):
    ggrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.GELU(), nn.Linear(32, 8))
    state = model.state_dict()
    q = ggrad.quantize(ggrad.randn(4, 64), "q8_0")
    h = ggrad.randn(3, 5).half()
    path = tmp_path / "model.gguf"
    ggrad.save({"model": state, "q": q, "h": h, "step": 42, "note": "hi"}, path)

    reader = gguf_py.GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    assert list(tensors) == ["model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias", "q", "h"]
    for key, value in state.items():
        t = tensors["model." + key]
        assert t.tensor_type == Q.F32 and list(t.shape) == list(reversed(value.shape))
        np.testing.assert_array_equal(np.asarray(t.data).reshape(value.shape), value.numpy())
    assert tensors["q"].tensor_type == Q.Q8_0 and list(tensors["q"].shape) == [64, 4]
    np.testing.assert_array_equal(gguf_py.quants.dequantize(tensors["q"].data, Q.Q8_0).reshape(4, 64),
                                  q.dequantize().numpy())
    assert tensors["h"].tensor_type == Q.F16
    np.testing.assert_array_equal(np.asarray(tensors["h"].data).reshape(3, 5), h.numpy())
    assert reader.fields["ggrad.value.step"].contents() == 42
    assert reader.fields["ggrad.value.note"].contents() == "hi"


def test_files_written_by_gguf_writer_load(tmp_path):
    rng = np.random.default_rng(0)
    w32 = rng.standard_normal((4, 64)).astype(np.float32)
    w16 = rng.standard_normal((2, 3, 32)).astype(np.float16)
    path = tmp_path / "other.gguf"
    writer = gguf_py.GGUFWriter(path, "llama")
    scalars = [("u8", writer.add_uint8, 7), ("i8", writer.add_int8, -7), ("u16", writer.add_uint16, 65535),
               ("i16", writer.add_int16, -300), ("u32", writer.add_uint32, 2**32 - 1),
               ("i32", writer.add_int32, -5), ("f32", writer.add_float32, 0.5),
               ("u64", writer.add_uint64, 2**64 - 1), ("i64", writer.add_int64, -2**63),
               ("f64", writer.add_float64, 0.1), ("bool", writer.add_bool, True), ("str", writer.add_string, "ünï")]
    for key, add, value in scalars:
        add("test." + key, value)
    writer.add_array("test.ints", [1, 2, 3])
    writer.add_array("test.strs", ["a", "bc"])
    writer.add_array("test.floats", [0.5, 1.5])
    writer.add_array("test.bools", [True, False])
    writer.add_tensor("w32", w32)
    writer.add_tensor("w16", w16)
    for name, qtype in (("q8", Q.Q8_0), ("q4", Q.Q4_0)):
        writer.add_tensor(name, gguf_py.quants.quantize(w32, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    tensors, meta = ggrad.load(path, metadata=True)
    assert list(tensors) == ["w32", "w16", "q8", "q4"]
    np.testing.assert_array_equal(tensors["w32"].numpy(), w32)
    assert tensors["w16"].dtype is ggrad.float16 and tensors["w16"].shape == (2, 3, 32)
    np.testing.assert_array_equal(tensors["w16"].numpy(), w16)
    for name, qtype in (("q8", Q.Q8_0), ("q4", Q.Q4_0)):
        assert tensors[name].dtype.name == qtype.name.lower() and tensors[name].shape == (4, 64)
        expected = gguf_py.quants.dequantize(gguf_py.quants.quantize(w32, qtype), qtype)
        np.testing.assert_array_equal(tensors[name].dequantize().numpy(), expected)
    assert ggrad.load(path, dequantize=True)["q4"].dtype is ggrad.float32
    assert meta["general.architecture"] == "llama"
    for key, _, value in scalars:
        got = meta["test." + key]
        assert got == (np.float32(value) if key == "f32" else value), key
    assert meta["test.ints"] == [1, 2, 3] and meta["test.strs"] == ["a", "bc"]
    assert meta["test.floats"] == [0.5, 1.5] and meta["test.bools"] == [True, False]
