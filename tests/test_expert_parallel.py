"""Expert parallelism's dispatch and combine (impls/reference/parallel/expert_parallel.py) on a real 2-rank gloo group in
float64: each rank's sparse-layer output, input gradient, router gradient (summed over the ranks) and expert gradients
(each rank's slice, gathered) equal the single-process SparseMoeBlock's over the union of the ranks' tokens, with
uneven token counts and an expert that no token on any rank chooses."""

from __future__ import annotations

import multiprocessing
import traceback
from pathlib import Path

import torch

from packcheck.impls.reference.model.config import ModelConfig
from packcheck.impls.reference.model.moe import SparseMoeBlock

TOKENS_BY_RANK = (7, 3)
UNCHOSEN = 3  # an expert of rank 1 no token chooses: its router row is pushed far down on the constant feature
CONFIG = ModelConfig(model_type="qwen3_moe", vocab_size=8, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                     num_attention_heads=1, num_key_value_heads=1, head_dim=8, rms_norm_eps=1e-6, rope_theta=1e4,
                     tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=6, norm_topk_prob=True)


def single_block() -> tuple[SparseMoeBlock, torch.Tensor, torch.Tensor]:
    """The seeded block, every rank's tokens [N, C] (feature 0 constant) and an upstream gradient [N, C]."""
    generator = torch.Generator().manual_seed(0)
    block = SparseMoeBlock(CONFIG).double()
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64))
        block.gate.weight[UNCHOSEN, 0] = -50.0
    x_NC = torch.randn(sum(TOKENS_BY_RANK), CONFIG.hidden_size, generator=generator, dtype=torch.float64)
    x_NC[:, 0] = 1.0
    return block, x_NC, torch.randn(x_NC.shape, generator=generator, dtype=torch.float64)


def rank_main(rank: int, store: str, failures: Path) -> None:
    try:
        import torch.distributed as dist

        from packcheck.harness.contract import ParallelPlan
        from packcheck.impls.reference.parallel.expert_parallel import ExpertParallelMoe, masked_slot_weights
        from packcheck.impls.reference.parallel.expert_shard import expert_shard_of
        from packcheck.impls.reference.parallel.mesh import Mesh

        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
        block, x_NC, upstream_NC = single_block()
        whole_x = x_NC.clone().requires_grad_(True)
        (block(whole_x[None])[0] * upstream_NC).sum().backward()
        single = {name: p.grad.clone() for name, p in block.named_parameters()}  # the EP layer shares the router module

        mine = slice(sum(TOKENS_BY_RANK[:rank]), sum(TOKENS_BY_RANK[:rank + 1]))
        layer = ExpertParallelMoe(block, Mesh.build(ParallelPlan(dp=2, ep=2)), masked_slot_weights)
        layer.zero_grad(set_to_none=True)
        x = x_NC[mine].clone().requires_grad_(True)
        y_NC = layer(x[None])[0]
        (y_NC * upstream_NC[mine]).sum().backward()

        exact = dict(rtol=1e-12, atol=1e-12)
        with torch.no_grad():
            torch.testing.assert_close(y_NC, block(x_NC[None])[0][mine], **exact)
        torch.testing.assert_close(x.grad, whole_x.grad[mine], **exact)
        router = layer.gate.weight.grad.clone()
        dist.all_reduce(router)
        torch.testing.assert_close(router, single["gate.weight"], **exact)
        for name in ("gate_up_proj", "down_proj"):
            part = getattr(layer.experts, name)
            grad = part.grad if part.grad is not None else torch.zeros_like(part)
            whole = expert_shard_of(part).whole(grad)
            torch.testing.assert_close(whole, single[f"experts.{name}"], **exact)
            assert whole[UNCHOSEN].abs().max() == 0 and whole[:UNCHOSEN].abs().max() > 0
        dist.destroy_process_group()
    except BaseException:
        failures.joinpath(f"rank{rank}").write_text(traceback.format_exc())
        raise


def test_dispatch_and_combine_equal_the_single_process_block_with_an_expert_no_token_chooses(tmp_path):
    context = multiprocessing.get_context("fork")
    ranks = [context.Process(target=rank_main, args=(rank, str(tmp_path / "store"), tmp_path)) for rank in range(2)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(timeout=60)
    reports = "\n".join(p.read_text() for p in sorted(tmp_path.glob("rank*")))
    assert all(p.exitcode == 0 for p in ranks), reports or f"exit codes {[p.exitcode for p in ranks]}"
