"""Short PyTorch idioms, each written once against a `torch` namespace and run with PyTorch and with ggrad.

Each idiom returns tensors, numbers or nested tuples/lists of them; results must agree in value and dtype.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ggrad  # noqa: E402


def _x(T):
    return T.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4)) / 10


def _init_weights(T):
    def init(m):
        if isinstance(m, T.nn.Linear):
            T.nn.init.zeros_(m.weight)
            if m.bias is not None:
                T.nn.init.ones_(m.bias)
    model = T.nn.Sequential(T.nn.Linear(4, 3), T.nn.ReLU(), T.nn.Linear(3, 2))
    model.apply(init)
    return model(_x(T))


def _clip_grad_norm(T):
    T.manual_seed(0)
    lin = T.nn.Linear(4, 3)
    with T.no_grad():
        lin.weight.copy_(T.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)))
        lin.bias.zero_()
    lin(_x(T)).pow(2).sum().backward()
    norm = T.nn.utils.clip_grad_norm_(lin.parameters(), 1.0)
    return norm, lin.weight.grad


def _cosine_schedule(T):
    p = T.nn.Parameter(T.ones(2))
    opt = T.optim.AdamW([p], lr=1e-2)
    sched = T.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    lrs = []
    for _ in range(4):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    return lrs


def _dataloader(T):
    ds = T.utils.data.TensorDataset(T.arange(10).float(), T.arange(10))
    return [(a, b) for a, b in T.utils.data.DataLoader(ds, batch_size=4, shuffle=False)]


def _accuracy(T):
    logits = _x(T)[0]
    return (logits.argmax(-1) == T.tensor([3, 0, 3])).float().mean()


def _data_assign(T):
    p = T.nn.Parameter(T.ones(3))
    p.data = T.zeros(2, 2)
    p.data.add_(1.5)
    return p.detach(), p.requires_grad, type(p).__name__


def _to_copy(T):
    x = _x(T)
    y = x.to(T.float32, copy=True)
    y.add_(1)
    return x, y


IDIOMS = {
    "new_zeros_keeps_dtype": lambda T: T.ones(2, 3, dtype=T.long).new_zeros(2, 2),
    "new_zeros_tuple": lambda T: _x(T).new_zeros((1, 3)),
    "new_ones": lambda T: _x(T).new_ones(3),
    "new_full": lambda T: T.ones(2, dtype=T.long).new_full((2, 2), 7),
    "new_tensor_takes_self_dtype": lambda T: T.ones(1, dtype=T.long).new_tensor([1, 2]),
    "new_tensor_given_dtype": lambda T: T.ones(1).new_tensor([1, 2], dtype=T.float32),
    "softmax_dtype": lambda T: T.nn.functional.softmax(_x(T).half(), dim=-1, dtype=T.float32),
    "log_softmax_dtype": lambda T: T.nn.functional.log_softmax(T.tensor([[1, 2, 3]]), -1, dtype=T.float32),
    "method_softmax_dtype": lambda T: _x(T).half().softmax(-1, dtype=T.float32),
    "apply_init": _init_weights,
    "clip_grad_norm": _clip_grad_norm,
    "cosine_schedule": _cosine_schedule,
    "dataloader": _dataloader,
    "accuracy": _accuracy,
    "param_count": lambda T: sum(p.numel() for p in T.nn.Linear(4, 3).parameters()),
    "named_bias": lambda T: [n for n, _ in T.nn.Sequential(T.nn.Linear(2, 2)).named_parameters()
                             if n.endswith("bias")],
    "flatten_unflatten_layers": lambda T: T.nn.Sequential(T.nn.Flatten(), T.nn.Unflatten(1, (4, -1)))(_x(T)),
    "stack": lambda T: T.stack([_x(T), _x(T) * 2], dim=1),
    "where": lambda T: T.where(_x(T) > 1, _x(T), T.zeros_like(_x(T))),
    "bool_mask_select": lambda T: _x(T)[_x(T) > 1.5],
    "setitem_slice": lambda T: (lambda y: (y.__setitem__((slice(None), 0), 0.0), y)[1])(_x(T).clone()),
    "var_unbiased_false": lambda T: _x(T).var(dim=-1, unbiased=False),
    "max_dim_values_indices": lambda T: tuple(_x(T).max(dim=-1)),
    "sum_over_tuple": lambda T: _x(T).sum(dim=(0, 2)),
    "cross_entropy_3d": lambda T: T.nn.functional.cross_entropy(_x(T).transpose(1, 2),
                                                                T.tensor([[0, 1, 2], [1, 1, 1]])),
    "cross_entropy_label_smoothing": lambda T: T.nn.functional.cross_entropy(_x(T)[0], T.tensor([0, 1, 2]),
                                                                             label_smoothing=0.1),
    "sdpa_causal": lambda T: T.nn.functional.scaled_dot_product_attention(_x(T), _x(T), _x(T), is_causal=True),
    "int_times_int_is_int": lambda T: T.tensor([1, 2]) * 2,
    "int_div_is_float": lambda T: T.tensor([1, 2]) / 2,
    "item_int": lambda T: T.tensor([3]).item(),
    "tolist": lambda T: T.tensor([[1, 2]]).tolist(),
    "to_other_tensor": lambda T: _x(T).to(T.tensor([1], dtype=T.int32)),
    "to_non_blocking": lambda T: _x(T).to("cpu", non_blocking=True),
    "to_copy": _to_copy,
    "flip_varargs": lambda T: (_x(T).flip(0, 2), _x(T).flip(dims=(1,)), _x(T).flip([-1])),
    "repeat_interleave_counts": lambda T: T.repeat_interleave(T.tensor([1, 0, 3])),
    "repeat_interleave_output_size": lambda T: _x(T).repeat_interleave(2, dim=1, output_size=6),
    "parameter_data_assign": _data_assign,
    "batched_matrix_transpose": lambda T: _x(T).mT,
    "is_cuda_is_cpu": lambda T: (_x(T).is_cuda, _x(T).is_cpu),
    "aliases": lambda T: (T.multiply(_x(T), 2), _x(T).subtract(1, alpha=2), T.moveaxis(_x(T), 0, -1),
                          _x(T).transpose(0, 2).ravel(), T.positive(_x(T)), _x(T).ndimension(),
                          _x(T).nelement(), _x(T).get_device(), _x(T).is_signed(), _x(T).is_complex()),
    "tensor_where": lambda T: _x(T).where(_x(T) > 1, -1.0),
    "take_along_dim": lambda T: (T.take_along_dim(_x(T), T.tensor([[[0], [3], [1]]]), 2),
                                 T.take_along_dim(_x(T), T.tensor([5, 0, 23])),
                                 _x(T).take_along_dim(_x(T).argmax(-1, keepdim=True), dim=-1)),
    "nansum": lambda T: (T.nansum(T.tensor([[1.0, float("nan")], [2.0, 3.0]]), 1),
                         T.tensor([float("nan"), 1.0]).nansum(), T.nansum(T.arange(4))),
    "retains_grad": lambda T: (lambda x: (lambda y: (y.retain_grad(), y.retains_grad, (x * 3).retains_grad,
                                                     x.retains_grad)[1:])(x * 2))(T.ones(2, requires_grad=True)),
    "mean_of_ints_with_dtype": lambda T: (T.arange(5).mean(dtype=T.float32),
                                          T.arange(6).view(2, 3).mean(1, dtype=T.float16)),
}


def _plain(value):
    """Tensors to numpy arrays; containers element by element; plain Python values kept."""
    if isinstance(value, (torch.Tensor, ggrad.Tensor)):
        return value.detach().numpy()
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _assert_same(got, want, where):
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray), where
        assert got.dtype == want.dtype, (where, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=where)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-5), where
    else:
        assert type(got) is type(want) and got == want, (where, got, want)


@pytest.mark.parametrize("name", sorted(IDIOMS))
def test_idiom_matches_pytorch(name):
    want = _plain(IDIOMS[name](torch))
    got = _plain(IDIOMS[name](ggrad))
    _assert_same(got, want, name)
