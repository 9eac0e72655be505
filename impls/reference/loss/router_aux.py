"""The MoE load-balancing auxiliary loss, defined over the global batch, and the routing pre-pass it needs.

The definition is transformers' `load_balancing_loss_func` (Switch Transformer eqs. 4-6), over the
L sparse layers jointly and the N real (non-padding) tokens of the global batch (every micro-batch
of every dp x cp rank):

    aux = E * sum_e f_e * P_e,    f_e = C_e / (L N),    P_e = S_e / (L N)

C_e: the top-k assignments of tokens to expert e, summed over layers (so sum_e f_e = k);
S_e: the router probability of e, summed over layers and tokens.

Which tokens: every real token, prompt tokens included, padding never. The router routes (and the
experts compute) every token it is given, loss target or not, so the balance is over all of them;
padding is only an artefact of the layout (a packed row and a padded batch of the same samples
hold different amounts of it), so counting it would make the aux loss, and every router
gradient, depend on packing. This is also what HF computes when given the padded batch's
attention_mask.

f is a count (no gradient), P is a sum over tokens, so the global aux is the sum of per-forward
shares E * sum_e C_e * S_e(forward) / (L N)^2, which need the global C and N before the first
backward: `routing_prepass` runs this rank's forwards once without gradients and all-reduces the
counts over the mesh, as the trainer does for its loss-token count. The training loss an engine
backpropagates is the LossSpec's loss + router_aux_loss_coef * aux; the aux loss is reported on
its own (StepResult.aux_loss), with the global C per layer (StepResult.router_tokens_per_expert).

Shapes: L sparse layers, E experts, K experts per token, N a forward's B*T tokens, M micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from packcheck.impls.reference.data.predictions import Predictions
from packcheck.harness.engines.pad_poison import PadPoisoner
from packcheck.impls.reference.model.moe import Routing, record_routing, router_probabilities
from packcheck.impls.reference.model.pad_poison import poisoned_pads
from packcheck.impls.reference.parallel.mesh import Mesh


@dataclass(frozen=True, slots=True)
class RouterCounts:
    tokens_per_expert_LE: torch.Tensor  # int64: top-k assignments of real tokens to each expert, per sparse layer
    real_tokens: int  # real (non-padding) tokens routed in each layer


def real_tokens_N(predictions: Predictions) -> torch.Tensor:
    """True for every position that holds a sample's token (not padding), row-major like the router's N."""
    return (predictions.sample_BT >= 0).reshape(-1)


def count_routes(routing: Sequence[Routing], real_N: torch.Tensor, num_experts: int) -> torch.Tensor:
    """Top-k assignments of the real tokens to each expert, per sparse layer: [L, E] int64."""
    real_N = real_N.to(routing[0].experts_NK.device)
    return torch.stack([torch.bincount(r.experts_NK[real_N].flatten(), minlength=num_experts) for r in routing]).cpu()


def routing_prepass(model: torch.nn.Module, shards: Sequence[Sequence[Predictions]], attention, mesh: Mesh,
                    num_experts: int, poisoner: PadPoisoner | None = None) -> tuple[list[RouterCounts], RouterCounts]:
    """Every forward of this rank once, without gradients: each micro-batch's counts (its whole rows, summed over
    the CP group) and the global batch's (summed over every micro-batch and the data-parallel group). `poisoner`: a
    pad-poisoned case's, written into these forwards as into the step's (model/pad_poison.py)."""
    device = next(model.parameters()).device
    per_micro_MLE, real_M = [], []
    with torch.no_grad():
        for forwards in shards:
            tokens_LE, real = 0, 0
            for predictions in forwards:
                p = predictions.to(device)
                with record_routing(model) as routing, poisoned_pads(model, poisoner, p.sample_BT):
                    model(p.input_ids_BT, p.position_ids_BT, p.segment_ids_BT, attention)
                tokens_LE = tokens_LE + count_routes(routing, real_tokens_N(p), num_experts)
                real += int(real_tokens_N(p).sum())
            per_micro_MLE.append(tokens_LE)
            real_M.append(real)
    micro_MLE = mesh.all_reduce(torch.stack(per_micro_MLE).to(torch.float64), "cp")
    micro_real_M = mesh.all_reduce(torch.tensor(real_M, dtype=torch.float64), "cp")
    global_LE = mesh.all_reduce(micro_MLE.sum(0), "dp")
    global_real = mesh.all_reduce(micro_real_M.sum().reshape(1), "dp")
    micro = [RouterCounts(c_LE.round().long(), int(n)) for c_LE, n in zip(micro_MLE, micro_real_M.tolist())]
    return micro, RouterCounts(global_LE.round().long(), int(global_real.item()))


def balance_counts(micro: RouterCounts, global_: RouterCounts) -> RouterCounts:
    """The counts a micro-batch's aux loss is normalised by: the global batch's (the pipeline step a mutant replaces)."""
    return global_


def with_aux_loss(loss: torch.Tensor, aux: torch.Tensor, coef: float, counts) -> torch.Tensor:
    """What a forward backpropagates: its loss plus coef x its aux-loss share (shares sum to the global aux, so the
    aux gradient is d(coef x aux)/d theta whatever the partition; the pipeline step a mutant replaces)."""
    return loss + coef * aux


def aux_loss_share(routing: Sequence[Routing], real_N: torch.Tensor, balance: RouterCounts, global_real_tokens: int) -> torch.Tensor:
    """This forward's share of the aux loss: E * sum_e f_e * S_e / (L n) * n / N, with f and n from `balance`.

    With the global counts (n = N) the shares of all forwards sum to the global aux; with a micro-batch's own,
    to the token-weighted mean of per-micro-batch aux losses."""
    L, E = balance.tokens_per_expert_LE.shape
    n = balance.real_tokens
    S_E = sum(router_probabilities(r.router_logits_NE)[real_N.to(r.router_logits_NE.device)].sum(0) for r in routing)
    f_E = balance.tokens_per_expert_LE.sum(0).to(S_E) / (L * n)
    return E * (f_E * S_E).sum() / (L * n) * (n / global_real_tokens)
