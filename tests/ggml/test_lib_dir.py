"""GGRAD_GGML_LIB_DIR: loading GGML from a directory outside the installed package (in subprocesses)."""

import os
import subprocess
import sys

from ggrad.ggml._lib import LIB_DIR, _libggml_dir

_PROBE = "import ggrad.ggml as g; print(g._lib.LIB_DIR); print(len(g.devices()))"


def _run(lib_dir):
    env = dict(os.environ, GGRAD_GGML_LIB_DIR=str(lib_dir))
    return subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)


def test_override_with_the_installed_lib_dir_imports(tmp_path):
    """Pointed at the installed package's own lib dir, import works and that dir is reported."""
    installed = _libggml_dir()
    r = _run(installed)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == str(installed)
    assert int(r.stdout.splitlines()[1]) >= 1  # the CPU at least


def test_override_is_searched_recursively(tmp_path):
    """A build tree's layout (src/, src/ggml-cpu/) is found below the given directory."""
    installed = _libggml_dir()
    (tmp_path / "src" / "ggml-cpu").mkdir(parents=True)
    for name, sub in (("libggml-base.so", "src"), ("libggml.so", "src"), ("libggml-cpu.so", "src/ggml-cpu")):
        (tmp_path / sub / name).symlink_to((installed / name).resolve())
    for extra in installed.glob("libggml-rpc.so*"):  # what libggml.so links, found through its $ORIGIN runpath
        (tmp_path / "src" / extra.name).symlink_to(extra.resolve())
    r = _run(tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == str(tmp_path)


def test_override_without_libraries_is_a_clear_import_error(tmp_path):
    r = _run(tmp_path)
    assert r.returncode != 0
    assert "ImportError" in r.stderr
    assert "GGRAD_GGML_LIB_DIR" in r.stderr and "libggml-base.so" in r.stderr


def test_override_that_is_no_directory_is_a_clear_import_error(tmp_path):
    r = _run(tmp_path / "missing")
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "is not a directory" in r.stderr


def test_this_process_reports_its_lib_dir():
    want = os.environ.get("GGRAD_GGML_LIB_DIR")
    assert str(LIB_DIR) == (str(want) if want else str(_libggml_dir()))
