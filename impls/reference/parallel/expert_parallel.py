"""Expert parallelism (EP) of the reference trainer: the experts of every sparse layer spread over the `ep` ranks of an
expert-parallel group (consecutive data-parallel ranks: ParallelPlan.group_ranks("ep")), tokens sent to their expert's
rank and back.

Each rank keeps experts [ep_rank * E/ep, (ep_rank + 1) * E/ep) (LocalExperts, under the checkpoint's names
mlp.experts.gate_up_proj / down_proj, holding the slice) and the whole router. In each sparse layer the router runs on
the rank's own tokens, exactly as in model/moe.py's SparseMoeBlock; then

- the local path: every (token, slot) through this rank's experts, as a batched experts kernel does (transformers'
  batched experts under EP): a slot whose expert lives on another rank goes to the last local expert with routing
  weight zero (`slot_weights`: the reference masks it, in value and gradient; its output must add nothing);
- the remote path: the slots of other ranks' experts sorted by owner, their rows sent there (an all-to-all of uneven
  counts: parallel/token_exchange.py), computed by the owner's experts, sent back (the combine all-to-all), weighted by
  their routing probabilities here and added, as the single-process block adds them.

Gradients: the combine's backward sends each remote slot's output gradient to the expert's owner, and the dispatch's
backward brings the input gradient home, so after a rank's backward its expert slices hold the gradient of every token
of its EP group that chose them. Dense parameters (router included) are reduced as always (DDP's sum over the dp x cp
group); DDP is kept away from the expert slices (`_set_params_and_buffers_to_ignore_for_model`: DDP neither buckets
nor reduces them) and `reduce_expert_grads` sums them over the expert-data-parallel group only (dp / ep ranks holding
the same experts). The StepResult reports every tensor whole (expert_shard.py: all-gathered over EP); the gradient
norm counts each expert once (optim/grad_clip.py: expert squares summed over EP).

Shapes: N = B*T tokens, K experts per token, C hidden_size, S slots sent, R rows received, G ranks of the EP group.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from packcheck.harness.contract import Case
from packcheck.impls.reference.model.moe import Experts, SparseMoeBlock
from packcheck.impls.reference.parallel.expert_shard import ExpertShard, expert_shard_of, mark
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.parallel.token_exchange import exchange_counts, exchange_no_grad, exchange_rows

SlotWeights = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # routing weights [N, K], remote slots [N, K] -> local path's weights


def masked_slot_weights(top_p_NK: torch.Tensor, remote_NK: torch.Tensor) -> torch.Tensor:
    """The local path's routing weights: zero for a slot of another rank's expert, in value and in gradient (the
    pipeline step a mutant replaces)."""
    return top_p_NK.masked_fill(remote_NK, 0.0)


class LocalExperts(nn.Module):
    """Experts [first, first + count) of a sparse layer: its Experts' parameters sliced, under the same names."""

    def __init__(self, experts: Experts, first: int, count: int, shard: ExpertShard):
        super().__init__()
        self.first, self.count = first, count
        for name in ("gate_up_proj", "down_proj"):
            whole = getattr(experts, name)
            part = nn.Parameter(whole.detach()[first:first + count].clone(), requires_grad=whole.requires_grad)
            setattr(self, name, mark(part, shard))

    def expert(self, e: int, x_nC: torch.Tensor) -> torch.Tensor:
        gate_nF, up_nF = nn.functional.linear(x_nC, self.gate_up_proj[e]).chunk(2, dim=-1)
        return nn.functional.linear(nn.functional.silu(gate_nF) * up_nF, self.down_proj[e])

    def forward(self, x_NC: torch.Tensor, local_e_NK: torch.Tensor, weight_NK: torch.Tensor) -> torch.Tensor:
        """model/moe.py's Experts.forward over the local experts (local_e_NK: indices into them)."""
        y_NC = torch.zeros_like(x_NC)
        for e in range(self.count):
            token_n, slot_n = torch.where(local_e_NK == e)
            if token_n.numel():
                y_NC = y_NC.index_add(0, token_n, self.expert(e, x_NC[token_n]) * weight_NK[token_n, slot_n, None])
        return y_NC

    def rows(self, x_RC: torch.Tensor, local_e_R: torch.Tensor) -> torch.Tensor:
        """Each received row through its expert, unweighted (the sender weights it)."""
        out_RC = torch.zeros_like(x_RC)
        for e in range(self.count):
            (rows_r,) = torch.where(local_e_R == e)
            if rows_r.numel():
                out_RC = out_RC.index_add(0, rows_r, self.expert(e, x_RC[rows_r]))
        return out_RC


class ExpertParallelMoe(nn.Module):
    """A SparseMoeBlock whose experts are spread over the EP group (the module docstring); `gate` is the block's own."""

    def __init__(self, block: SparseMoeBlock, mesh: Mesh, slot_weights: SlotWeights):
        super().__init__()
        count = block.experts.num_experts // mesh.ep
        self.group, self.ep, self.ep_rank, self.slot_weights = mesh.group("ep"), mesh.ep, mesh.ep_rank, slot_weights
        self.gate = block.gate
        self.experts = LocalExperts(block.experts, mesh.ep_rank * count, count, ExpertShard(self.group, count))

    def forward(self, x_BTC: torch.Tensor) -> torch.Tensor:
        B, T, C = x_BTC.shape
        x_NC = x_BTC.reshape(B * T, C)
        _, top_p_NK, top_e_NK = self.gate(x_NC)
        owner_NK = torch.div(top_e_NK, self.experts.count, rounding_mode="floor")
        remote_NK = owner_NK != self.ep_rank
        local_e_NK = torch.where(remote_NK, self.experts.count - 1, top_e_NK - self.experts.first)
        y_NC = self.experts(x_NC, local_e_NK, self.slot_weights(top_p_NK, remote_NK))
        return self.add_remote(y_NC, x_NC, top_p_NK, top_e_NK, owner_NK, remote_NK).view(B, T, C)

    def add_remote(self, y_NC, x_NC, top_p_NK, top_e_NK, owner_NK, remote_NK) -> torch.Tensor:
        """Dispatch the slots of other ranks' experts, compute the slots others sent here, combine, weight, add. Every
        rank of the group takes part in every forward, with or without rows to send."""
        token_S, slot_S = torch.where(remote_NK)
        order_S = torch.argsort(owner_NK[token_S, slot_S], stable=True)  # runs by owner, in rank order
        token_S, slot_S = token_S[order_S], slot_S[order_S]
        send_G = torch.bincount(owner_NK[token_S, slot_S], minlength=self.ep)
        receive, send = exchange_counts(send_G, self.group), send_G.tolist()
        x_RC = exchange_rows(x_NC[token_S], self.group, send, receive)
        e_R = exchange_no_grad(top_e_NK[token_S, slot_S], self.group, send, receive)
        out_RC = self.experts.rows(x_RC, e_R - self.experts.first)
        back_SC = exchange_rows(out_RC, self.group, receive, send)
        return y_NC.index_add(0, token_S, back_SC * top_p_NK[token_S, slot_S, None])


def shard_experts(model: nn.Module, mesh: Mesh, slot_weights: SlotWeights) -> None:
    """Every sparse layer's block replaced by its ExpertParallelMoe on this rank; DDP told to leave the expert slices."""
    for layer in model.model.layers:
        if isinstance(layer.mlp, SparseMoeBlock):
            layer.mlp = ExpertParallelMoe(layer.mlp, mesh, slot_weights)
    ignored = [name for name, p in model.named_parameters() if expert_shard_of(p) is not None]
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, ignored)


def expert_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad and expert_shard_of(p) is not None]


def reduce_expert_grads(model: nn.Module, mesh: Mesh) -> None:
    """After the step's last backward: each expert slice's gradient (every EP rank's tokens already in it) summed over
    the ranks holding the same experts, and marked as a slice (the pipeline step a mutant replaces)."""
    for p in expert_parameters(model):
        if "expert_dp" in mesh.groups:
            dist.all_reduce(p.grad, group=mesh.group("expert_dp"))
        mark(p.grad, expert_shard_of(p))


def require_equal_forwards(forwards: int, mesh: Mesh) -> None:
    """Every forward is a collective of the EP group: ranks that run different numbers would wait on one another forever."""
    if mesh.ep > 1:
        most, least = mesh.all_reduce(torch.tensor([forwards, -forwards], dtype=torch.float64), "dp", op="max").tolist()
        if most != -least:
            raise ValueError(f"expert parallelism needs every data-parallel rank to run the same number of forwards per step: "
                             f"between {int(-least)} and {int(most)} here; give every rank as many micro-batches (one forward each "
                             "in a packed layout)")


def expert_parallel_missing(case: Case) -> str | None:
    """Why the reference cannot run `case`'s expert parallelism, or None."""
    plan = case.parallel
    config = json.loads((Path(case.model.checkpoint) / "config.json").read_text())
    text = config.get("text_config", config)
    experts = text.get("num_experts") or text.get("num_local_experts") or 0  # transformers 5 writes num_local_experts
    where = "(impls/reference/parallel/expert_parallel.py)"
    if not experts:
        return f"parallel.ep={plan.ep} spreads experts over ranks, and {case.model.family} has none: use ep=1"
    if experts % plan.ep:
        return f"parallel.ep={plan.ep} must divide the model's num_experts={experts}: each EP rank holds num_experts / ep experts"
    if plan.cp > 1 or plan.tp > 1 or plan.pp > 1:
        return (f"the reference runs expert parallelism on data-parallel ranks only: {plan.describe()} is not implemented; the fix "
                f"{where} sums expert gradients over expert-dp x cp and cuts experts' rows per tp rank")
    if plan.dp_style == "shard":
        return (f"the reference's expert parallelism runs with DDP (dp_style 'replicate' or None), not FSDP2: the fix {where} "
                "shards the expert slices over expert-dp instead of the data group")
    return None
