"""Every example runs as shipped, in a short mode."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_example(name, *args, timeout=300):
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))   # this tree's ggrad
    out = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], capture_output=True, text=True,
                         timeout=timeout, env=env, cwd=ROOT)
    assert out.returncode == 0, f"{name} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def test_custom_function_example():
    stdout = run_example("custom_function.py")
    assert "max |analytic - numeric|" in stdout


def test_mlp_sequential_example():
    stdout = run_example("mlp_sequential.py", "--quick")
    assert "test: {'loss'" in stdout and "predictions identical = True" in stdout


def test_char_gpt_short_run_trains_saves_and_resumes(tmp_path):
    from ggrad.examples import char_gpt
    corpus = Path(char_gpt.__file__)   # a real Python file as a tiny corpus
    common = ["--corpus", str(corpus), "--d-model", "32", "--layers", "1", "--heads", "2", "--context", "16",
              "--batch", "8", "--eval-every", "10", "--sample", "20", "--out", str(tmp_path)]
    stdout = run_example("char_gpt.py", "--steps", "20", *common)
    assert "final validation loss" in stdout and "--- sample ---" in stdout
    assert (tmp_path / "checkpoint.gguf").exists()
    resumed = run_example("char_gpt.py", "--steps", "30", "--resume", *common)
    assert "resumed from" in resumed and "at step 20" in resumed


def test_char_gpt_resume_is_bitwise_the_uninterrupted_run(tmp_path):
    """N steps in one run, and k steps then --resume for the rest, give bitwise the same weights, optimizer
    state and per-step losses (the batches and the dropout masks are drawn from the step's own seed)."""
    import ggrad
    from ggrad.examples import char_gpt
    common = ["--corpus", str(Path(char_gpt.__file__)), "--d-model", "16", "--layers", "1", "--heads", "2",
              "--context", "8", "--batch", "4", "--dropout", "0.2", "--eval-every", "3", "--sample", "0",
              "--steps", "7"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    run_example("char_gpt.py", *common, "--out", str(whole))
    stopped = run_example("char_gpt.py", *common, "--stop-after", "4", "--out", str(parts))
    assert "stopped after step 4 of 7" in stopped
    resumed = run_example("char_gpt.py", *common, "--resume", "--out", str(parts))
    assert "at step 4" in resumed and "final validation loss" in resumed
    a, b = (ggrad.load(d / "checkpoint.gguf") for d in (whole, parts))
    assert a["step"] == b["step"] == 7
    for name, value in a["model"].items():
        assert np.array_equal(value.numpy(), b["model"][name].numpy()), name
    assert len(a["history"]["train"]) == 7 and a["history"] == b["history"]
    eager = tmp_path / "eager"   # the replayed steps (compile_step, the default) are bitwise the eager ones
    run_example("char_gpt.py", *common, "--eager", "--out", str(eager))
    e = ggrad.load(eager / "checkpoint.gguf")
    for name, value in a["model"].items():
        assert np.array_equal(value.numpy(), e["model"][name].numpy()), name
    assert a["history"] == e["history"]
    other = tmp_path / "other"   # the test can fail: another seed trains to other weights
    run_example("char_gpt.py", *common, "--seed", "1", "--out", str(other))
    c = ggrad.load(other / "checkpoint.gguf")
    assert not np.array_equal(c["model"]["tok.weight"].numpy(), a["model"]["tok.weight"].numpy())


def test_char_gpt_learns_below_unigram():
    """The main job's model, trained briefly in-process on a small corpus, beats the unigram baseline."""
    import argparse
    from ggrad.examples import char_gpt
    import ggrad
    corpus = Path(argparse.__file__)   # a stdlib file: stable, unlike the example's own source as it is edited
    result = char_gpt.main(["--corpus", str(corpus), "--steps", "100", "--d-model", "48", "--layers", "1",
                            "--heads", "2", "--context", "32", "--batch", "16", "--lr", "5e-3",
                            "--eval-every", "100", "--sample", "0", "--out", str(ROOT / "runs" / "test_char_gpt")])
    assert result["val_loss"] < result["unigram"] - 0.3, result
    assert np.isfinite(result["val_loss"])
    ggrad.reset_stats()


def test_corpus_split_is_by_file_and_deterministic():
    from ggrad.examples import char_gpt
    a_train, a_val = char_gpt.load_corpus(max_bytes=2 << 20)
    b_train, b_val = char_gpt.load_corpus(max_bytes=2 << 20)
    assert 0 < len(a_val) < len(a_train)
    np.testing.assert_array_equal(a_val, b_val)
    assert a_train.max() < len(char_gpt.VOCAB)
    with pytest.raises(FileNotFoundError):
        char_gpt.load_corpus("/nonexistent/corpus")


def test_dp_train_rpc_example_trains_checkpoints_and_resumes_on_the_cpu(tmp_path):
    import ggrad.ggml as gg
    if not gg.has_backend("RPC"):
        pytest.skip("needs GGML built with RPC (see README)")
    from ggrad.examples import char_gpt
    common = ["--corpus", char_gpt.__file__, "--d-model", "32", "--layers", "1", "--context", "16", "--batch", "8",
              "--checkpoint-every", "3", "--out", str(tmp_path)]
    stdout = run_example("dp_train_rpc.py", "--servers", "1", "--steps", "6", *common)
    assert "devices: cpu, RPC" in stdout and "after 6 steps" in stdout
    resumed = run_example("dp_train_rpc.py", "--servers", "0", "--steps", "9", "--resume", *common)
    assert "devices: cpu;" in resumed and "at step 6" in resumed and "after 9 steps" in resumed
