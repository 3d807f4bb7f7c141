"""torch.nn.utils' weight_norm / remove_weight_norm and parameters_to_vector / vector_to_parameters, and the
legacy autograd.Variable and lr_scheduler._LRScheduler names, against PyTorch."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")


def _pair(make):
    torch.manual_seed(0)
    theirs = make(torch)
    ours = make(ggrad)
    ours.load_state_dict({k: ggrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("make, shape, dim", [
    (lambda lib: lib.nn.Linear(5, 4), (3, 5), 0),
    (lambda lib: lib.nn.Conv1d(3, 6, 3), (2, 3, 9), 0),
    (lambda lib: lib.nn.Conv1d(3, 6, 3), (2, 3, 9), 1),
    (lambda lib: lib.nn.Linear(5, 4), (3, 5), None)])
def test_weight_norm_as_pytorchs(make, shape, dim):
    def normed(lib):
        return lib.nn.utils.weight_norm(make(lib), dim=dim)
    ours, theirs = _pair(normed)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict()) == ["bias", "weight_g", "weight_v"]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    for _ in range(2):   # the weight follows g and v after they change
        yo, yt = ours(ggrad.tensor(x)), theirs(torch.tensor(x))
        np.testing.assert_allclose(yo.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        yo.square().sum().backward()
        yt.square().sum().backward()
        for name, p in ours.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), dict(theirs.named_parameters())[name].grad.numpy(),
                                       rtol=1e-4, atol=1e-5, err_msg=name)
        with ggrad.no_grad():
            ours.weight_g.mul_(1.5)
        with torch.no_grad():
            theirs.weight_g.mul_(1.5)
    ggrad.nn.utils.remove_weight_norm(ours)
    torch.nn.utils.remove_weight_norm(theirs)
    assert sorted(ours.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert isinstance(ours.weight, ggrad.nn.Parameter)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        ggrad.nn.utils.remove_weight_norm(ours)


def test_parameters_to_vector_and_back():
    ours, theirs = _pair(lambda lib: lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Linear(4, 2)))
    vo = ggrad.nn.utils.parameters_to_vector(ours.parameters())
    vt = torch.nn.utils.parameters_to_vector(theirs.parameters())
    np.testing.assert_array_equal(vo.detach().numpy(), vt.detach().numpy())
    new = np.arange(vo.numel(), dtype=np.float32) / 10
    ggrad.nn.utils.vector_to_parameters(ggrad.tensor(new), ours.parameters())
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs.parameters())
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(), err_msg=name)
    vo.sum().backward()   # differentiable in the parameters
    assert all(p.grad is not None for p in ours.parameters())


def test_variable_and_lr_scheduler_legacy_names():
    from ggrad.autograd import Variable
    t = ggrad.ones(2)
    v = Variable(t, requires_grad=True)
    assert v.requires_grad and v.is_leaf and Variable(t) is t and isinstance(t, Variable)
    (v * 2).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), [2.0, 2.0])
    from ggrad.optim.lr_scheduler import _LRScheduler

    class Halving(_LRScheduler):
        def get_lr(self):
            return [base * 0.5 ** self.last_epoch for base in self.base_lrs]

    opt = ggrad.optim.SGD([ggrad.nn.Parameter(ggrad.ones(1))], lr=1.0)
    scheduler = Halving(opt)
    for _ in range(3):
        opt.step()
        scheduler.step()
    assert scheduler.get_last_lr() == [0.125]
