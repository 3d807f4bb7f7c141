"""F.normalize, F.cosine_similarity, F.pairwise_distance and F.kl_div (and their layers CosineSimilarity,
PairwiseDistance, KLDivLoss) against PyTorch: values and the gradients of both inputs, zero vectors and
zero targets included."""

import warnings

import numpy as np
import pytest

import ggrad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)
P = np.abs(RNG.standard_normal((3, 4))).astype(np.float32)
P[0, 1] = 0.0   # a zero target: its term is 0, not 0 * log 0
P /= P.sum(1, keepdims=True)

CALLS = {
    "normalize": lambda T, x, y: T.nn.functional.normalize(x),
    "normalize_p1_dim0": lambda T, x, y: T.nn.functional.normalize(x, p=1, dim=0),
    "normalize_zero_vectors": lambda T, x, y: T.nn.functional.normalize(x * 0),
    "cosine_similarity": lambda T, x, y: T.nn.functional.cosine_similarity(x, y),
    "cosine_similarity_broadcast_dim0": lambda T, x, y: T.nn.functional.cosine_similarity(x, y[:1], dim=0),
    "cosine_similarity_zero_vector": lambda T, x, y: T.nn.functional.cosine_similarity(x * 0, y),
    "cosine_similarity_layer": lambda T, x, y: T.nn.CosineSimilarity(dim=-1)(x, y),
    "pairwise_distance": lambda T, x, y: T.nn.functional.pairwise_distance(x, y),
    "pairwise_distance_p1_keepdim": lambda T, x, y: T.nn.functional.pairwise_distance(x, y, p=1, keepdim=True),
    "pairwise_distance_layer": lambda T, x, y: T.nn.PairwiseDistance(p=3)(x, y),
    "kl_div_batchmean": lambda T, x, y: T.nn.functional.kl_div(x.log_softmax(1), T.tensor(P), reduction="batchmean"),
    "kl_div_none": lambda T, x, y: T.nn.functional.kl_div(x.log_softmax(1), T.tensor(P), reduction="none"),
    "kl_div_mean": lambda T, x, y: T.nn.functional.kl_div(x.log_softmax(1), T.tensor(P)),
    "kl_div_log_target_sum": lambda T, x, y: T.nn.functional.kl_div(x.log_softmax(1), y.log_softmax(1),
                                                                     reduction="sum", log_target=True),
    "kl_div_layer": lambda T, x, y: T.nn.KLDivLoss(reduction="batchmean")(x.log_softmax(1), T.tensor(P)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_matches_torch_with_gradients(name):
    results = []
    for T in (torch, ggrad):
        x, y = T.tensor(A, requires_grad=True), T.tensor(B, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # torch warns that kl_div's 'mean' is not the KL
            out = CALLS[name](T, x, y)
        (out * out).sum().backward()
        results.append([out.detach().numpy(), x.grad.numpy(), None if y.grad is None else y.grad.numpy()])
    theirs, ours = results
    assert ours[0].shape == theirs[0].shape
    np.testing.assert_allclose(ours[0], theirs[0], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(ours[1], theirs[1], atol=1e-4, rtol=1e-4)
    assert (ours[2] is None) == (theirs[2] is None)
    if theirs[2] is not None:
        np.testing.assert_allclose(ours[2], theirs[2], atol=1e-4, rtol=1e-4)


def test_kl_div_refuses_an_unknown_reduction_as_torch():
    for T in (torch, ggrad):
        with pytest.raises(ValueError):
            T.nn.functional.kl_div(T.zeros(2), T.zeros(2), reduction="avg")
