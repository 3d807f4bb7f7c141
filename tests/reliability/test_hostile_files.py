"""Hostile checkpoint files never abort, hang or exhaust memory: ggrad.load refuses each with a FormatError (a
ValueError) naming the file, and the member where one is at fault (strings, objects, dates in a member).
Every case runs in one subprocess under a 2 GiB address-space limit and a timeout, so an abort, a hang or a
huge allocation fails the test instead of killing pytest."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

import ggrad
from ggrad.ggml import gguf

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
import ggrad
ggrad.ggml.hooks.set_log_level("none")
for path in sys.argv[1:]:
    try:
        ggrad.load(path)
    except ValueError as e:
        print(type(e).__name__, path, str(e)[:400].replace("\\n", " "), flush=True)
    except BaseException as e:
        print("OTHER", path, type(e).__name__, str(e)[:200], flush=True)
    else:
        print("accepted", path, flush=True)
"""


def _npy_header(shape, dtype="<f4"):
    """A version 1.0 .npy header for an array of `shape` (what np.save writes first)."""
    text = repr({"descr": dtype, "fortran_order": False, "shape": tuple(shape)}).encode()
    text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text


def _meta_member(structure):
    data = json.dumps(structure).encode()
    return _npy_header((len(data),), "|u1") + data


def _archive(path, members, compress=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression=compress) as z:
        for name, writer in members.items():
            with z.open(name, "w", force_zip64=True) as f:
                if callable(writer):
                    writer(f)
                else:
                    f.write(writer)


def _zeros(header, nbytes, chunk=1 << 20):
    def write(f):
        f.write(header)
        for start in range(0, nbytes, chunk):
            f.write(bytes(min(chunk, nbytes - start)))
    return write


def _hostile(tmp):
    good = tmp / "good.npz"
    ggrad.save({"w": ggrad.randn(64, 64), "step": 3}, good)
    good_gguf = tmp / "good.gguf"
    ggrad.save({"w": ggrad.randn(64, 64), "step": 3}, good_gguf)
    root = {"format": "ggrad.save", "version": 1, "root": {"tensor": "a0", "dtype": "f32"}}
    cases = {}
    # a decompression bomb: 256 MiB of zeros deflated into a few hundred KiB, shape honestly declared
    bomb = tmp / "bomb.npz"
    _archive(bomb, {"__ggrad__.npy": _meta_member(root),
                    "a0.npy": _zeros(_npy_header((1 << 26,)), 1 << 28)}, zipfile.ZIP_DEFLATED)
    cases[bomb] = "decompression bomb"
    # a tiny stored member whose header claims 2**40 floats
    liar = tmp / "lying_shape.npz"
    _archive(liar, {"__ggrad__.npy": _meta_member(root), "a0.npy": _npy_header((1 << 40,)) + bytes(16)})
    cases[liar] = "declares shape"
    nested = tmp / "nested.npz"   # metadata nested 100,000 deep
    deep = ("[" * 100000 + "]" * 100000).encode()
    _archive(nested, {"__ggrad__.npy": _npy_header((len(deep),), "|u1") + deep})
    cases[nested] = "nested deeper"
    nested_nodes = tmp / "nested_nodes.npz"   # well-formed structure nodes, 3,000 lists deep
    data = ('{"format": "ggrad.save", "version": 1, "root": ' + '{"list": [' * 3000 + '{"float": 1.0}'
            + ']}' * 3000 + '}').encode()
    _archive(nested_nodes, {"__ggrad__.npy": _npy_header((len(data),), "|u1") + data})
    cases[nested_nodes] = "nested deeper"
    raw = good.read_bytes()
    for cut in (0, 1, 4, 30, 100, len(raw) // 2, len(raw) - 30, len(raw) - 1):
        p = tmp / f"truncated_{cut}.npz"
        p.write_bytes(raw[:cut])
        cases[p] = "truncated"
    magic = tmp / "wrong_magic.npz"
    magic.write_bytes(b"PK\x05\x07" + raw[4:])
    cases[magic] = "wrong_magic"
    foreign = tmp / "gguf_named_npz.npz"
    foreign.write_bytes(good_gguf.read_bytes())
    cases[foreign] = "gguf_named_npz"
    raw = good_gguf.read_bytes()
    for cut in (3, 30, len(raw) // 2, len(raw) - 1):
        p = tmp / f"truncated_{cut}.gguf"
        p.write_bytes(raw[:cut])
        cases[p] = f"truncated_{cut}"
    for kind, values in (("strings", np.array(["ab", "c"])), ("bytes", np.array([b"ab"])),
                         ("dates", np.array(["2024-01-01"], dtype="M8[D]")), ("void", np.zeros(2, "V4")),
                         ("complex", np.ones(2, np.complex64)), ("records", np.zeros(2, "i4,f4"))):
        for node in ("tensor", "ndarray"):
            if kind == "complex" and node == "ndarray":
                continue   # a complex numpy array is what save writes for one
            crafted = tmp / f"{kind}_{node}.npz"
            structure = {**root, "root": {node: "a0", "dtype": "f32"} if node == "tensor" else {node: "a0"}}
            with open(crafted, "wb") as f:
                np.savez(f, __ggrad__=np.frombuffer(json.dumps(structure).encode(), np.uint8), a0=values)
            cases[crafted] = "'a0'"   # the message names the member
    objects = tmp / "objects_tensor.npz"
    with open(objects, "wb") as f:
        np.savez(f, __ggrad__=np.frombuffer(json.dumps(root).encode(), np.uint8), a0=np.array([{}, None]))
    cases[objects] = "'a0.npy'"
    bad_dtype = tmp / "unknown_dtype.npz"
    with open(bad_dtype, "wb") as f:
        np.savez(f, __ggrad__=np.frombuffer(json.dumps({**root, "root": {"tensor": "a0", "dtype": "bogus"}}).encode(),
                                             np.uint8), a0=np.ones(2, np.float32))
    cases[bad_dtype] = "bogus"
    deep_gguf = tmp / "nested.gguf"
    gguf.write(deep_gguf, {"ggrad.format": "ggrad.save", "ggrad.version": np.uint32(1),
                           "ggrad.structure": "[" * 100000 + "]" * 100000}, [])
    cases[deep_gguf] = "nested"
    return cases


def test_hostile_checkpoints_raise_format_error_in_a_bounded_subprocess(tmp_path):
    cases = _hostile(tmp_path)
    assert os.path.getsize(tmp_path / "bomb.npz") < 2 << 20   # tiny on disk
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", _SCRIPT, *map(str, cases)], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert len(lines) == len(cases), out.stdout + out.stderr[-2000:]
    for line, (path, expect) in zip(lines, cases.items()):
        kind, named = line.split()[:2]
        assert kind == "FormatError" and named == str(path), line
        assert expect in line, line
        assert str(path) in line.split(None, 2)[2], line   # the message names the file


def test_the_same_files_written_honestly_still_load(tmp_path):
    """The header checks accept what numpy itself writes, compressed within the bound or not."""
    weights = {"w": ggrad.randn(32, 32), "b": [ggrad.ones(3), np.arange(5)]}
    path = tmp_path / "ok.npz"
    ggrad.save(weights, path)
    with np.load(path) as archive:
        members = {k: archive[k] for k in archive.files}
    packed = tmp_path / "packed.npz"
    np.savez_compressed(packed, **members)
    for p in (path, packed):
        back = ggrad.load(p)
        assert np.array_equal(back["w"].numpy(), weights["w"].numpy())
        assert np.array_equal(back["b"][1], np.arange(5))
