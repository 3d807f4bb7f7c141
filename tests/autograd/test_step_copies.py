"""The W2 GPT training step's copies (GGML CONT nodes, and CONCAT nodes: the CPU copies transposed views by
concat, lowering.transpose_copy; 8 of them are the attention projection's joins) stay at most what they
are now, under the CPU and the CUDA lowering (lowering.py; the CUDA choices built and run on the CPU): a rule that brings a
materialised transpose back fails here. benchmarks/count_step_nodes.py says where each copy comes from."""

import numpy as np
import pytest

import ggrad
from ggrad import optim
from ggrad.autograd import execution, lowering, trace_cache
from ggrad.examples.char_gpt import CharGPT

# W2: vocab 96, d_model 128, 4 layers, 4 heads, context 64 (batch 2: the counts do not depend on it)
MOST_COPIES = {"CPU": 4, "RPC": 99, "CUDA": 12}   # CUDA: bias sums by out_prod, no copy (was 122); x's
# gradients out_prod of w and g's transposed view (linalg.input_grad), no transposed weight (was 53); the
# one-op self-attention's k and v gradients out_prod of the heads' views in place (was 36), and its
# products of v and k themselves too (was 20)
# RPC (the CPU's choices with GGML's ops): 111 until the first operand of mul_mat was read strided
# (lowering.strided_matmul "first"); the CPU's 103 fell to 20 when its products moved to ggrad's kernel,
# which reads transposed operands in place (lowering.matmul "kernel"), and to 12 when its joins did
# (lowering.concat "kernel": those are CONCAT_F32 nodes, not counted), and to 4 when the attention gradient's
# joins read the heads' views in place (ops/attention.py)


# the same step under autocast float16 with CUDA's choices: the one-op attention casts qkv to float32 for
# its out_prods instead of copying v, k, P and dS transposed in float16 (was 28)
MOST_AUTOCAST_COPIES = 12


def step_conts(choices, autocast=None):
    """CONT and CONCAT nodes of the second step built with `choices`, under autocast `autocast` (a dtype) if
    given (the graph cache, which does not key on the lowering, is off and forgets graphs built under other
    choices)."""
    was = trace_cache.ENABLED
    execution.set_graph_cache(False)
    try:
        return _conts(choices, autocast)
    finally:
        execution.set_graph_cache(was)


def _conts(choices, autocast):
    ggrad.manual_seed(0)
    cpu = ggrad.device("cpu")
    with execution.forced_lowering(cpu, choices):
        model = CharGPT(96, 128, 4, 4, 64)
        opt = optim.AdamW(model.parameters(), lr=3e-4)
        rng = np.random.default_rng(0)
        x = ggrad.tensor(rng.integers(0, 96, (2, 64)).astype(np.int32))
        y = ggrad.tensor(rng.integers(0, 96, (2 * 64,)).astype(np.int32))

        def step():
            with ggrad.autocast("cpu", dtype=autocast or ggrad.float16, enabled=autocast is not None):
                loss = ggrad.cross_entropy(model(x).reshape(-1, 96), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.item()

        step()
        with ggrad.profile() as prof:
            step()
    by_op = prof.by_op()
    return sum(by_op.get(op, (0, 0.0))[0] for op in ("CONT", "CONCAT"))


@pytest.mark.parametrize("backend", sorted(MOST_COPIES))
def test_w2_step_copies_do_not_come_back(backend):
    assert step_conts(getattr(lowering, backend)) <= MOST_COPIES[backend]


def test_autocast_step_copies_do_not_come_back():
    assert step_conts(lowering.CUDA, ggrad.float16) <= MOST_AUTOCAST_COPIES


def test_strided_matmul_reads_attention_heads_in_place():
    # the q and k head views of the fused projection feed mul_mat without copies: 2 a layer fewer
    import dataclasses
    copied = step_conts(dataclasses.replace(lowering.CUDA, strided_matmul="none"))
    assert step_conts(lowering.CUDA) <= copied - 2 * 4


def test_mul_mat_reads_the_first_operand_strided():
    # k for the scores and v for the weights' gradient: 2 a layer fewer (RPC servers' lowering: mul_mat)
    import dataclasses
    copied = step_conts(dataclasses.replace(lowering.RPC, strided_matmul="none"))
    assert step_conts(lowering.RPC) <= copied - 2 * 4
