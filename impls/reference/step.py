"""One training step of the reference trainer over a Case, on one process or on every rank of a
dp x cp mesh: each micro-batch's forwards and backwards, gradients summed over the mesh, an
optional AdamW step, and the StepResult (on rank 0).

`accumulate_gradients` is the forward/backward half on its own, so that `impls.reference.train`
runs many steps through exactly this code with its own model and optimizer persisting.

The pipeline (`pipe`) supplies the replaceable steps (unpad, pack, widen for CP, positions and
segments, target mask, shard, count, token weight, gradient reduction): the reference engine
passes its own, and each mutant replaces exactly one. The loss-token count is the engine's own
count of the targets in the rows it built, over every micro-batch of every data-parallel rank,
before the first backward, as a real trainer must.
"""

from __future__ import annotations

import torch

from harness.contract import Case, StepResult
from impls.reference.layouts import plan_forwards
from impls.reference.model import CausalLM
from impls.reference.parallel.mesh import Mesh
from impls.reference.predictions import Predictions, label_logprobs
from impls.reference.rows import build_rows
from impls.reference.scatter import SampleScatter


def build_micro_batches(case: Case, pipe, mesh: Mesh = Mesh.single()) -> list[list[Predictions]]:
    """The whole rows of every forward of this data-parallel rank's micro-batches, in execution order."""
    return [
        [Predictions.from_rows(build_rows(plans, pipe.positions_and_segments, pipe.target_mask))
         for plans in plan_forwards(case, micro_batch, pipe.pack_rows, pipe.unpad_mask, pipe.padded_width)]
        for micro_batch in case.partition.per_rank[mesh.dp_rank]
    ]


def accumulate_gradients(model: CausalLM, case: Case, pipe, attention, scatter: SampleScatter | None = None,
                         mesh: Mesh = Mesh.single()) -> tuple[float, int]:
    """Forwards and backwards of every micro-batch into `.grad`, summed over the mesh: the global
    loss and loss-token count."""
    device = next(model.parameters()).device
    micro_batches = build_micro_batches(case, pipe, mesh)
    micro_tokens = [sum(int(p.label_mask_BT.sum()) for p in forwards) for forwards in micro_batches]
    shards = [[pipe.shard(p, mesh) for p in forwards] for forwards in micro_batches]
    shard_tokens = sum(int(p.label_mask_BT.sum()) for forwards in shards for p in forwards)
    global_tokens = pipe.global_token_count(micro_tokens, shard_tokens, mesh)
    model.zero_grad(set_to_none=True)
    local_loss = 0.0
    for forwards, tokens in zip(shards, micro_tokens):
        weight = pipe.token_weight(tokens, global_tokens, len(micro_batches))
        for predictions in forwards:
            p = predictions.to(device)
            logits_BTV = model(p.input_ids_BT, p.position_ids_BT, p.segment_ids_BT, attention)
            lp_BT = label_logprobs(logits_BTV, p.label_BT)
            lp_BT.retain_grad()
            loss = -(lp_BT * p.label_mask_BT.to(lp_BT.dtype)).sum() * weight
            loss.backward()
            local_loss += loss.item()
            if scatter is not None:
                scatter.add(predictions, lp_BT, lp_BT.grad)
    pipe.reduce_gradients(model, mesh, shard_tokens)
    total_loss = mesh.all_reduce(torch.tensor([local_loss], dtype=torch.float64)).item()
    return total_loss, global_tokens


def global_token_count(micro_tokens: list[int], shard_tokens: int, mesh: Mesh) -> int:
    """Every rank of a CP group counted the same whole rows: sum over the data-parallel group only."""
    return int(mesh.all_reduce(torch.tensor([sum(micro_tokens)], dtype=torch.float64), "dp").item())


def reduce_gradients(model: CausalLM, mesh: Mesh, shard_tokens: int) -> None:
    """Each rank backpropagated its own share of the global loss: the gradient is their sum."""
    for p in model.parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        mesh.all_reduce(p.grad)


def shard(predictions: Predictions, mesh: Mesh) -> Predictions:
    return predictions.shard(mesh.cp_rank, mesh.cp)


def train_step(model: CausalLM, case: Case, pipe, attention, mesh: Mesh = Mesh.single()) -> StepResult | None:
    scatter = SampleScatter([len(s.input_ids) for s in case.samples], next(model.parameters()).dtype)
    total_loss, global_tokens = accumulate_gradients(model, case, pipe, attention, scatter, mesh)
    scatter.reduce(mesh)
    grads = {name: p.grad.detach().cpu().clone() for name, p in model.named_parameters()}
    params_after = None
    if case.optimizer is not None:
        spec = case.optimizer
        torch.optim.AdamW(model.parameters(), lr=spec.lr, betas=spec.betas, eps=spec.eps, weight_decay=spec.weight_decay).step()
        params_after = {name: p.detach().cpu().clone() for name, p in model.named_parameters()}
    if mesh.rank != 0:
        return None
    return StepResult(
        logprobs=scatter.per_sample(scatter.logprobs, first_token_zero=True),
        loss=total_loss,
        num_loss_tokens=global_tokens,
        grads=grads,
        dloss_dlogprobs=scatter.per_sample(scatter.dloss),
        params_after=params_after,
    )
