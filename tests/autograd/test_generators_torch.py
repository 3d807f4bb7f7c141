"""`generator=` as PyTorch takes it: rand, randn, randint, randperm, bernoulli and multinomial draw from a
caller's ggrad.Generator (the same seed gives the same draws, the default generator is left alone), a
non-Generator is refused (TypeError); randint's `randint(high, size)` and `randint(low, high, size)` forms
give PyTorch's shapes and dtype. The streams themselves differ from PyTorch's (numpy's PCG64)."""

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

DRAWS = {
    "rand": lambda T, g: T.rand(2, 3, generator=g),
    "randn": lambda T, g: T.randn((4,), generator=g),
    "randint": lambda T, g: T.randint(3, 9, (5,), generator=g),
    "randperm": lambda T, g: T.randperm(7, generator=g),
    "bernoulli": lambda T, g: T.bernoulli(T.full((8,), 0.5), generator=g),
    "bernoulli_method": lambda T, g: T.full((8,), 0.5).bernoulli(generator=g),
    "multinomial": lambda T, g: T.multinomial(T.tensor([[0.2, 0.3, 0.5]]), 3, generator=g),
    "multinomial_replacement": lambda T, g: T.multinomial(T.tensor([0.2, 0.3, 0.5]), 6, True, generator=g),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_a_seeded_generator_repeats_its_draws_and_leaves_the_default_alone(name):
    ggrad.manual_seed(11)
    after_default = ggrad.rand(3).numpy()
    ggrad.manual_seed(11)
    first = DRAWS[name](ggrad, ggrad.Generator().manual_seed(4)).numpy()
    second = DRAWS[name](ggrad, ggrad.Generator().manual_seed(4)).numpy()
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(ggrad.rand(3).numpy(), after_default)
    theirs = DRAWS[name](torch, torch.Generator().manual_seed(4))
    assert first.shape == tuple(theirs.shape) and first.dtype == theirs.numpy().dtype


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_a_non_generator_is_refused_as_torch(name):
    with pytest.raises(TypeError):
        DRAWS[name](torch, 3)
    with pytest.raises(TypeError):
        DRAWS[name](ggrad, 3)


@pytest.mark.parametrize("args", [(5, (3,)), (2, 5, (2, 2)), (4, [3]), (0, 3, ())], ids=str)
def test_randint_forms_as_torch(args):
    ours, theirs = ggrad.randint(*args), torch.randint(*args)
    assert ours.shape == tuple(theirs.shape) and ours.numpy().dtype == theirs.numpy().dtype
    low, high = (0, args[0]) if len(args) == 2 else args[:2]
    assert ours.numel() == 0 or (low <= ours.numpy().min() and ours.numpy().max() < high)


@pytest.mark.parametrize("args", [(5,), (3, 3, (2,)), (5, 2, (2,))], ids=str)
def test_randint_bad_arguments_as_torch(args):
    with pytest.raises(Exception) as theirs:
        torch.randint(*args)
    with pytest.raises(theirs.type):
        ggrad.randint(*args)
