"""Three training scripts in the style of PyTorch's public examples (tests/compat/scripts), each run twice: with
PyTorch, and with `import ggrad as torch`. Both runs start from the same weights and read the same batches, so
their losses must agree; what a script saves and loads back must give the same outputs.

- `word_language_model.py`: LSTM and Transformer language models with corpus batching, clipping, a manual
  SGD update through `p.data`, `torch.save(model, f)` / `torch.load(f, weights_only=False)` (the
  weights-only default refuses the script's classes, as PyTorch's does), sampling;
- `cnn_classifier.py`: MNIST-example style: torch.cuda / cudnn switches, DataLoader, Adadelta + StepLR,
  accuracy, a state-dict checkpoint;
- `char_model.py`: a DataLoader of worker processes (worker_init_fn, persistent_workers, pin_memory,
  prefetch_factor), torch.compile, AdamW(fused=False), LinearLR then CosineAnnealingLR in SequentialLR.
"""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ggrad  # noqa: E402

SCRIPTS = pathlib.Path(__file__).parent / "scripts"


def _load(name, lib):
    """The script `name` as a module of its own (registered, so pickle finds its classes) with `torch` = lib."""
    module_name = f"compat_{name}_{lib.__name__}"
    spec = importlib.util.spec_from_file_location(module_name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    module.torch = lib
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _start_state(holder):
    """An `init` that records the PyTorch model's initial weights in `holder`."""
    return lambda m: holder.setdefault("state", {k: v.detach().clone() for k, v in m.state_dict().items()})


def _load_start(holder):
    """An `init` that gives the ggrad model those weights."""
    return lambda m: m.load_state_dict({k: ggrad.tensor(v.numpy()) for k, v in holder["state"].items()})


@pytest.mark.parametrize("model_kind", ["lstm", "transformer"])
def test_word_language_model_script(model_kind, tmp_path):
    torch.manual_seed(0)
    start = {}
    ref = _load("word_language_model", torch).main(model_kind, _start_state(start), str(tmp_path))
    ours = _load("word_language_model", ggrad).main(model_kind, _load_start(start), str(tmp_path))
    np.testing.assert_allclose(ours[0], ref[0], rtol=2e-3)                # each step reads another batch
    np.testing.assert_allclose(ours[1], ref[1], rtol=2e-2, atol=2e-4)   # the reloaded model's outputs
    assert ours[2] == ref[2] == "UnpicklingError"                        # weights-only refused the script's class
    assert ours[3] and ref[3]


def test_cnn_classifier_script(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 1, 10, 10)).astype(np.float32)
    y = rng.integers(0, 3, size=16)
    torch.manual_seed(0)
    start = {}
    ref = _load("cnn_classifier", torch).main(_start_state(start), x, y, str(tmp_path))
    ours = _load("cnn_classifier", ggrad).main(_load_start(start), x, y, str(tmp_path))
    np.testing.assert_allclose(ours[0], ref[0], rtol=2e-3, atol=1e-5)
    assert ours[1] == pytest.approx(ref[1])
    assert ours[2] == ref[2]
    assert ours[3] == pytest.approx(ref[3], rel=2e-3)
    assert ours[4] and ref[4]


def test_character_model_script_with_worker_processes():
    torch.manual_seed(0)
    start = {}
    ref = _load("char_model", torch).main(_start_state(start))
    ours = _load("char_model", ggrad).main(_load_start(start))
    np.testing.assert_allclose(ours[0], ref[0], rtol=2e-3)
    assert ours[0][-1] < ours[0][0]
    assert ours[1] == ref[1] == (1, 6)
