"""Module: registration, the tree walks, modes, to(), zero_grad, state_dict / load_state_dict, repr."""

import numpy as np
import pytest

import ggrad
import ggrad.nn as nn
from ggrad.nn import Parameter


class Block(nn.Module):
    def __init__(self, shared=None):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.shared = shared if shared is not None else nn.Linear(4, 4)
        self.scale = Parameter(ggrad.ones(4))
        self.register_buffer("steps", ggrad.zeros(1))
        self.register_buffer("cache", ggrad.zeros(2), persistent=False)
        self.plain = 5

    def forward(self, x):
        return self.shared(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        shared = nn.Linear(4, 4)
        self.a = Block(shared)
        self.b = Block(shared)
        self.head = nn.Linear(4, 2, bias=False)
        self.tied = self.head.weight  # the same Parameter registered twice

    def forward(self, x):
        return self.head(self.b(self.a(x)[..., :3]))


def test_setattr_routes_parameters_modules_and_plain_values():
    b = Block()
    assert list(b._parameters) == ["scale"]
    assert list(b._modules) == ["fc", "shared"]
    assert list(b._buffers) == ["steps", "cache"]
    assert b.plain == 5 and "plain" in b.__dict__
    assert b.scale is b._parameters["scale"]
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'scale'"):
        b.scale = ggrad.ones(4)
    with pytest.raises(TypeError, match="as child module 'fc'"):
        b.fc = 3
    with pytest.raises(TypeError, match="as buffer 'steps'"):
        b.steps = 3
    b.steps = ggrad.ones(1)  # a Tensor replaces a buffer
    assert b._buffers["steps"].item() == 1.0
    b.scale = None
    assert b.scale is None and "scale" in b._parameters
    del b.fc
    assert "fc" not in b._modules
    with pytest.raises(AttributeError, match="no attribute 'fc'"):
        b.fc


def test_assigning_before_init_raises():
    class Bad(nn.Module):
        def __init__(self):
            self.w = Parameter(ggrad.ones(2))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()


def test_named_parameters_counts_shared_modules_and_tensors_once():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    # Own parameters before children's; b.shared and head.weight (== tied) were seen already.
    assert names == ["tied", "a.scale", "a.fc.weight", "a.fc.bias", "a.shared.weight", "a.shared.bias", "b.scale",
                     "b.fc.weight", "b.fc.bias"]
    assert len(list(net.parameters())) == len(names)
    assert len({id(p) for p in net.parameters()}) == len(names)
    assert [n for n, _ in net.named_parameters(prefix="net", recurse=False)] == ["net.tied"]
    assert [n for n, _ in net.a.named_parameters(recurse=False)] == ["scale"]
    all_names = [n for n, _ in net.named_parameters(remove_duplicate=False)]
    assert "b.shared.weight" in all_names and "tied" in all_names and "head.weight" in all_names


def test_buffers_children_and_modules():
    net = Net()
    assert [n for n, _ in net.named_buffers()] == ["a.steps", "a.cache", "b.steps", "b.cache"]
    assert len(list(net.buffers())) == 4
    assert [n for n, _ in net.named_children()] == ["a", "b", "head"]
    assert list(net.children()) == [net.a, net.b, net.head]
    names = [n for n, _ in net.named_modules()]
    assert names == ["", "a", "a.fc", "a.shared", "b", "b.fc", "head"]
    assert len(list(net.modules())) == 7
    assert net.get_submodule("a.shared") is net.a.shared
    with pytest.raises(AttributeError, match="no submodule 'nope'"):
        net.get_submodule("a.nope")


def test_train_eval_apply_and_requires_grad():
    net = Net()
    assert net.training and net.a.fc.training
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Linear", "Block", "Linear", "Linear", "Block", "Linear", "Net"]  # shared: twice
    net.a.requires_grad_(False)
    assert not net.a.fc.weight.requires_grad and net.b.fc.weight.requires_grad


def test_zero_grad():
    net = Net()
    net(ggrad.randn(2, 3)).sum().backward()
    grads = [p for p in net.parameters() if p.grad is not None]
    assert len(grads) == len(list(net.parameters()))
    net.zero_grad(set_to_none=False)
    for p in net.parameters():
        assert p.grad.shape == p.shape and not p.grad.numpy().any()
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_to_dtype_keeps_parameter_identity():
    net = Net()
    params = list(net.parameters())
    before = [p.numpy() for p in params]
    assert net.to(ggrad.float16) is net
    after = list(net.parameters())
    assert all(p is q for p, q in zip(params, after))
    for p, b in zip(after, before):
        assert p.dtype is ggrad.float16 and isinstance(p, Parameter) and p.requires_grad
        np.testing.assert_allclose(p.numpy().astype(np.float32), b, rtol=1e-3, atol=1e-3)
    assert net.a.steps.dtype is ggrad.float16
    net.to(dtype=ggrad.float32)
    assert all(p.dtype is ggrad.float32 for p in net.parameters())
    assert net.to("cpu") is net and net.to(ggrad.device("cpu")) is net
    with pytest.raises(TypeError, match="floating point"):
        net.to(ggrad.int32)


def test_to_keeps_integer_buffers():
    m = nn.Module()
    m.register_buffer("ids", ggrad.arange(4))
    m.to(ggrad.float16)
    assert m.ids.dtype is ggrad.int64   # arange of ints is int64, as PyTorch


def test_state_dict_keys_values_and_keep_vars():
    net = Net()
    sd = net.state_dict()
    # Shared modules and tensors appear under every name, as in PyTorch; the non-persistent buffer is left out.
    assert list(sd) == ["tied", "a.scale", "a.steps", "a.fc.weight", "a.fc.bias", "a.shared.weight", "a.shared.bias",
                        "b.scale", "b.steps", "b.fc.weight", "b.fc.bias", "b.shared.weight", "b.shared.bias",
                        "head.weight"]
    assert all(not isinstance(v, Parameter) and not v.requires_grad for v in sd.values())
    np.testing.assert_array_equal(sd["a.fc.weight"].numpy(), net.a.fc.weight.numpy())
    kept = net.state_dict(keep_vars=True)
    assert kept["a.fc.weight"] is net.a.fc.weight


def test_load_state_dict_copies_values_in():
    src, dst = Net(), Net()
    x = ggrad.randn(2, 3)
    expected = src(x).numpy()
    weight = dst.a.fc.weight
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert dst.a.fc.weight is weight                   # same Parameter object, new values
    np.testing.assert_allclose(dst(x).numpy(), expected, rtol=1e-6, atol=1e-6)
    # Values are copied, not shared: an in-place update of the source (as optimizers make) leaves dst alone.
    from ggrad.optim import fused_updates
    kept = dst.a.fc.weight.numpy()
    fused_updates.assign_(src.a.fc.weight, ggrad.zeros(4, 3))
    ggrad.realize("cpu")
    assert not src.a.fc.weight.numpy().any()
    np.testing.assert_array_equal(dst.a.fc.weight.numpy(), kept)
    # numpy arrays load too
    dst.load_state_dict({k: v.numpy() for k, v in Net().state_dict().items()})


def test_load_state_dict_errors_list_missing_unexpected_and_shapes():
    net = Net()
    sd = net.state_dict()
    del sd["a.fc.bias"]
    sd["extra.weight"] = ggrad.ones(1)
    sd["head.weight"] = ggrad.ones(5, 5)
    before = net.a.fc.weight.numpy()
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(sd)
    msg = str(info.value)
    assert "Missing key(s) in state_dict: \"a.fc.bias\"" in msg
    assert "Unexpected key(s) in state_dict: \"extra.weight\"" in msg
    assert "size mismatch for head.weight: copying a param with shape (5, 5)" in msg
    assert "the shape in current model is (2, 4)" in msg
    np.testing.assert_array_equal(net.a.fc.weight.numpy(), before)  # nothing copied
    sd["head.weight"] = net.head.weight.numpy()
    missing, unexpected = net.load_state_dict(sd, strict=False)
    assert missing == ["a.fc.bias"] and unexpected == ["extra.weight"]
    with pytest.raises(TypeError, match="dict-like"):
        net.load_state_dict([1, 2])


def test_repr_lists_the_tree_with_extra_repr():
    net = Net()
    text = repr(net)
    assert text.splitlines()[0] == "Net("
    assert "  (a): Block(\n    (fc): Linear(in_features=3, out_features=4, bias=True)" in text
    assert "(head): Linear(in_features=4, out_features=2, bias=False)" in text
    assert text.endswith(")")
    assert repr(nn.ReLU()) == "ReLU()"
    assert repr(nn.Dropout(0.1)) == "Dropout(p=0.1, inplace=False)"   # as PyTorch


def test_forward_missing_and_call():
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)

    class Twice(nn.Module):
        def forward(self, x, k=2):
            return x * k

    assert Twice()(ggrad.ones(1), k=3).item() == 3.0


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and isinstance(layers[-1], nn.Linear)
    assert [n for n, _ in layers.named_parameters()][:2] == ["0.weight", "0.bias"]
    layers.append(nn.ReLU())
    layers.insert(0, nn.Tanh())
    assert [type(m).__name__ for m in layers] == ["Tanh", "Linear", "Linear", "Linear", "ReLU"]
    del layers[0]
    assert list(layers._modules) == ["0", "1", "2", "3"]
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    with pytest.raises(IndexError, match="out of range"):
        layers[7]
    heads = nn.ModuleDict({"cls": nn.Linear(2, 3), "reg": nn.Linear(2, 1)})
    assert list(heads) == ["cls", "reg"] and "cls" in heads
    heads["aux"] = nn.Identity()
    assert list(heads.keys()) == ["cls", "reg", "aux"]
    assert [n for n, _ in heads.named_parameters()] == ["cls.weight", "cls.bias", "reg.weight", "reg.bias"]
    assert isinstance(heads.pop("aux"), nn.Identity) and len(heads) == 2
    text = repr(nn.ModuleList([nn.ReLU()]))
    assert text == "ModuleList(\n  (0): ReLU()\n)"



def test_reassigning_a_child_keeps_its_position():
    m = nn.Module()
    m.a = nn.Linear(1, 1)
    m.b = nn.Linear(1, 1)
    m.a = nn.Linear(1, 1)
    assert list(m._modules) == ["a", "b"]
    assert list(m.state_dict())[:2] == ["a.weight", "a.bias"]
