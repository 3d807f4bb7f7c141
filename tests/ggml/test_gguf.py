"""ggrad.ggml.gguf: metadata and tensor round trips, writer checks, atomic writes, hostile files (subprocess)."""

import os
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

import ggrad.ggml as gg
from ggrad.ggml import gguf

ROOT = pathlib.Path(__file__).resolve().parents[2]

EVERY_KIND = {
    "u8": np.uint8(200), "i8": np.int8(-100), "u16": np.uint16(60000), "i16": np.int16(-30000),
    "u32": np.uint32(4_000_000_000), "i32": np.int32(-2_000_000_000), "f32": np.float32(1.25),
    "u64": np.uint64(2**64 - 1), "i64": np.int64(-2**63), "f64": np.float64(-0.1), "int": 12345678901234,
    "float": 2.5e-300, "bool": True, "str": "héllo wörld", "empty_str": "",
    "arr_u8": np.array([1, 2, 255], np.uint8), "arr_f32": np.array([1.5, -2.0], np.float32),
    "arr_i64": [1, -2, 3], "arr_f64": [0.1, 0.2], "arr_bool": [True, False, True], "arr_str": ["a", "", "ü"],
    "arr_empty_i32": np.array([], np.int32),
}


def test_metadata_of_every_kind_and_tensors_round_trip(tmp_path, rng):
    w = rng.standard_normal((3, 64)).astype(np.float32)
    q = gg.encode(w, "q4_0")
    path = tmp_path / "m.gguf"
    gguf.write(path, EVERY_KIND, [("w", "f32", [64, 3], w.view(np.uint8)), ("q", "q4_0", [64, 3], q)])
    f = gguf.read(path)
    assert list(f.metadata) == list(EVERY_KIND) and f.version == 3 and f.alignment == 32
    for key, value in EVERY_KIND.items():
        got = f.metadata[key]
        if isinstance(value, np.generic):
            assert type(got) is type(value) and got == value, key
        elif isinstance(value, np.ndarray):
            assert got.dtype == value.dtype and np.array_equal(got, value), key
        elif isinstance(value, list):
            assert list(np.asarray(got).tolist() if isinstance(got, np.ndarray) else got) == value, key
        else:
            assert got == value and type(got) in (type(value), np.int64, np.float64), key
    assert [(t.name, t.dtype.name, t.ne, t.shape) for t in f.tensors] == [
        ("w", "f32", (64, 3, 1, 1), (3, 64)), ("q", "q4_0", (64, 3, 1, 1), (3, 64))]
    np.testing.assert_array_equal(f.read_data(f.by_name["w"]).view(np.float32).reshape(3, 64), w)
    np.testing.assert_array_equal(f.read_data(f.by_name["q"]), q)
    assert f.tensors[0].offset % 32 == 0 and f.tensors[1].offset % 32 == 0


def test_written_file_is_a_plain_file_and_failures_leave_nothing(tmp_path, monkeypatch):
    path = tmp_path / "a.gguf"
    old = os.umask(0o027)
    try:
        gguf.write(path, {"k": 1}, [])
    finally:
        os.umask(old)
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    original = path.read_bytes()
    with pytest.raises(ValueError, match="duplicate tensor name"):
        gguf.write(path, {}, [("a", "f32", [1], np.zeros(4, np.uint8)), ("a", "f32", [1], np.zeros(4, np.uint8))])
    def interrupt(*args):
        raise KeyboardInterrupt

    def disk_full(*args):
        raise OSError("disk full")

    for name, fail, error in (("fsync", interrupt, KeyboardInterrupt), ("replace", disk_full, OSError)):
        monkeypatch.setattr(os, name, fail)   # fsync: after the bytes are written; replace: the rename
        with pytest.raises(error):
            gguf.write(path, {"k": 2}, [("w", "f32", [1], np.zeros(4, np.uint8))])
        monkeypatch.undo()
        assert path.read_bytes() == original and os.listdir(tmp_path) == ["a.gguf"]


@pytest.mark.parametrize("metadata, tensors, match", [
    ({"": 1}, [], "must not be empty"),
    ({"a\0b": 1}, [], "NUL"),
    ({"s": "x\0y"}, [], "NUL"),
    ({"general.alignment": np.uint32(64)}, [], "general.alignment"),
    ({"general.alignment": 32}, [], "general.alignment"),
    ({"big": 2**64}, [], "int64"),
    ({"obj": object()}, [], "cannot store"),
    ({"nested": [[1], [2]]}, [], "1-D"),
    ({}, [("n" * 64, "f32", [1], np.zeros(4, np.uint8))], "at most 63"),
    ({}, [("w", "q4_0", [33], np.zeros(18, np.uint8))], "multiple of the block size 32"),
    ({}, [("w", "f32", [2, 2], np.zeros(15, np.uint8))], "needs 16 bytes"),
    ({}, [("w", "f32", [1, 1, 1, 1, 1], np.zeros(4, np.uint8))], "1 to 4"),
])
def test_writer_refuses_what_ggml_would_abort_on(tmp_path, metadata, tensors, match):
    with pytest.raises((ValueError, TypeError, OverflowError), match=match):
        gguf.write(tmp_path / "bad.gguf", metadata, tensors)
    assert os.listdir(tmp_path) == []


def _header(n_tensors, n_kv, version=3):
    return b"GGUF" + struct.pack("<Iqq", version, n_tensors, n_kv)


def _string(s):
    return struct.pack("<Q", len(s)) + s


def _kv(key, gtype, payload):
    return _string(key) + struct.pack("<i", gtype) + payload


def _tensor_info(name, ne, gtype, offset):
    return _string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}q", *ne) + struct.pack("<iQ", gtype,
                                                                                                      offset)


def _with_data(head, nbytes):
    return head + bytes(-len(head) % 32) + bytes(nbytes)


# hand-made hostile files: each must give FormatError, never a crash or a huge allocation
HOSTILE = {
    "empty": b"",
    "foreign": b"PK\x03\x04" + bytes(40),
    "header_only_magic": b"GGUF\x03\x00",
    "version_1": _header(0, 0, version=1),
    "version_4": _header(0, 0, version=4),
    "big_endian": _header(0, 0, version=3 << 24),
    "negative_counts": _header(-1, 0),
    "huge_kv_count": _header(0, 2**62),
    "huge_tensor_count": _header(2**61, 0) + bytes(100),
    "huge_string": _header(0, 1) + struct.pack("<Q", 2**62) + b"key",
    "huge_array": _header(0, 1) + _kv(b"a", 9, struct.pack("<iQ", 4, 2**61)),
    "huge_string_array": _header(0, 1) + _kv(b"a", 9, struct.pack("<iQ", 8, 2**60)),
    "array_of_arrays": _header(0, 1) + _kv(b"a", 9, struct.pack("<iQ", 9, 1)),
    "bad_value_type": _header(0, 1) + _kv(b"a", 77, b"\0" * 8),
    "empty_key": _header(0, 1) + _kv(b"", 4, b"\0" * 4),
    "duplicate_key": _header(0, 2) + _kv(b"a", 4, b"\0" * 4) * 2,
    "bad_utf8_key": _header(0, 1) + _kv(b"\xff\xfe", 4, b"\0" * 4),
    "alignment_not_u32": _header(0, 1) + _kv(b"general.alignment", 8, _string(b"32")),
    "alignment_not_power_of_2": _header(0, 1) + _kv(b"general.alignment", 4, struct.pack("<I", 24)),
    "too_many_dims": _with_data(_header(1, 0) + _tensor_info(b"t", [1] * 5, 0, 0), 4),
    "negative_dim": _with_data(_header(1, 0) + _tensor_info(b"t", [-4], 0, 0), 16),
    "element_overflow": _with_data(_header(1, 0) + _tensor_info(b"t", [2**40, 2**40], 0, 0), 16),
    "unknown_tensor_type": _with_data(_header(1, 0) + _tensor_info(b"t", [4], 999, 0), 16),
    "removed_tensor_type": _with_data(_header(1, 0) + _tensor_info(b"t", [32], 4, 0), 64),
    "row_not_block_multiple": _with_data(_header(1, 0) + _tensor_info(b"t", [33], 2, 0), 64),
    "long_tensor_name": _with_data(_header(1, 0) + _tensor_info(b"n" * 100, [4], 0, 0), 16),
    "duplicate_tensor": _with_data(_header(2, 0) + _tensor_info(b"t", [4], 0, 0) * 2, 64),
    "tensor_offset_gap": _with_data(_header(1, 0) + _tensor_info(b"t", [4], 0, 64), 96),
    "tensor_past_end": _with_data(_header(1, 0) + _tensor_info(b"t", [1 << 20], 0, 0), 16),
    "huge_tensor_past_end": _with_data(_header(1, 0) + _tensor_info(b"t", [2**31, 2**20], 0, 0), 16),
}

_HOSTILE_SCRIPT = """
import sys
import ggrad.ggml as gg
from ggrad.ggml import gguf
gg.hooks.set_log_level("none")
for path in sys.argv[1:]:
    try:
        gguf.read(path)
    except gg.FormatError as e:
        print("FormatError", path, str(e)[:300].replace("\\n", " "), flush=True)
    else:
        print("accepted", path, flush=True)
"""


def test_hostile_files_raise_format_error_in_a_subprocess(tmp_path):
    paths = []
    for name, data in HOSTILE.items():
        p = tmp_path / f"{name}.gguf"
        p.write_bytes(data)
        paths.append(str(p))
    out = subprocess.run([sys.executable, "-c", _HOSTILE_SCRIPT, *paths], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) == len(HOSTILE) and all(line.startswith("FormatError") for line in lines), out.stdout
    assert all(str(tmp_path) in line for line in lines)   # the message names the file
    by_name = {pathlib.Path(line.split()[1]).stem: line for line in lines}
    assert "not a GGUF file" in by_name["foreign"]
    assert "version 4" in by_name["version_4"]
    assert "2305843009213693952 tensors" in by_name["huge_tensor_count"]
    assert "takes bytes" in by_name["tensor_past_end"]
    assert "not UTF-8" in by_name["bad_utf8_key"]


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        gguf.read(tmp_path / "nope.gguf")
