"""`from torch.X.Y import Z` works as `from ggrad.X.Y import Z` wherever ggrad has Z: each of PyTorch's module paths
below is checked against PyTorch's own module for every name ggrad has (at the path's home namespace)."""

import importlib
import pkgutil

import pytest

import ggrad

torch = pytest.importorskip("torch")

NN_MODULES = [m.name for m in pkgutil.iter_modules(importlib.import_module("torch.nn.modules").__path__)
              if not m.name.startswith("_")]
# (PyTorch's path below torch, the ggrad namespace whose names it should offer)
PATHS = ([(f"nn.modules.{m}", "nn") for m in NN_MODULES] + [("nn.modules", "nn")] +
         [("nn.parameter", "nn"), ("nn.utils.rnn", "nn.utils.rnn"), ("nn.utils.clip_grad", "nn.utils"),
          ("nn.utils", "nn.utils"), ("optim.optimizer", "optim"), ("optim.lr_scheduler", "optim.lr_scheduler"),
          ("optim.sgd", "optim"), ("optim.adam", "optim"), ("optim.adamw", "optim"), ("optim.rmsprop", "optim"),
          ("optim.adagrad", "optim"), ("utils.data.dataloader", "utils.data"), ("utils.data.dataset", "utils.data"),
          ("utils.data.sampler", "utils.data"), ("utils.data", "utils.data"), ("serialization", ""),
          ("autograd.function", "autograd"), ("autograd.grad_mode", "autograd")])


def _public(module):
    names = getattr(module, "__all__", None)
    return names if names is not None else [n for n in vars(module) if not n.startswith("_")]


@pytest.mark.parametrize("path, home", PATHS, ids=[p for p, _ in PATHS])
def test_pytorch_paths_offer_the_names_ggrad_has(path, home):
    theirs = importlib.import_module(f"torch.{path}")
    home_ns = importlib.import_module(f"ggrad.{home}" if home else "ggrad")
    wanted = [n for n in _public(theirs) if hasattr(home_ns, n) and not isinstance(getattr(home_ns, n), type(ggrad))]
    if not wanted:
        return   # a path of names ggrad has none of (e.g. torch.nn.modules.fold): nothing to offer yet
    ours = importlib.import_module(f"ggrad.{path}")
    missing = [n for n in wanted if not hasattr(ours, n)]
    assert missing == [], f"ggrad.{path} lacks {missing}, which ggrad.{home or ''} has"
    assert all(getattr(ours, n) is getattr(home_ns, n) for n in wanted)


def test_paths_hold_the_same_objects_for_pickle_and_isinstance():
    from ggrad.nn.modules.linear import Linear
    from ggrad.nn.parameter import Parameter
    from ggrad.utils.data.dataloader import DataLoader, default_collate
    assert Linear is ggrad.nn.Linear and Parameter is ggrad.nn.Parameter
    assert DataLoader is ggrad.utils.data.DataLoader and default_collate is ggrad.utils.data.default_collate
