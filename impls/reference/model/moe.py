"""The sparse MoE block of Qwen3-MoE: a softmax top-k router and experts that are SwiGLU MLPs.

Mirrors transformers' Qwen3MoeTopKRouter, Qwen3MoeExperts and Qwen3MoeSparseMoeBlock with the same
attribute names (mlp.gate.weight, mlp.experts.gate_up_proj, mlp.experts.down_proj: the experts
fused into 3D tensors, as transformers 5 stores them), so parameter names equal the checkpoint's.
Each token goes to the k experts of highest router probability; their outputs are summed weighted
by those probabilities (renormalised over the k when `norm_topk_prob`). HF computes the router
softmax in float32 always; here in at least float32, so float64 is float64 end to end.

`record_routing` hands out every sparse layer's router logits and chosen experts of a forward, as
transformers' `output_router_logits` does: the load-balancing loss (impls/reference/loss/router_aux.py)
is built from them.

Shapes: B batch, T sequence, N = B*T tokens, C hidden_size, E experts, K experts per token,
F moe_intermediate_size.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from packcheck.impls.reference.model.config import ModelConfig


class TopKRouter(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.top_k, self.norm_topk_prob = config.num_experts_per_tok, config.norm_topk_prob
        self.weight = nn.Parameter(torch.zeros(config.num_experts, config.hidden_size))

    def forward(self, x_NC: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Router logits [N, E], the chosen experts' weights [N, K] and their indices [N, K]."""
        return self.route(F.linear(x_NC, self.weight))

    def route(self, router_logits_NE: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """forward's outputs from given router logits (a pad-poisoning hook routes its overwritten logits through it)."""
        probs_NE = router_probabilities(router_logits_NE)
        top_p_NK, top_e_NK = torch.topk(probs_NE, self.top_k, dim=-1)
        if self.norm_topk_prob:
            top_p_NK = top_p_NK / top_p_NK.sum(dim=-1, keepdim=True)
        return router_logits_NE, top_p_NK.to(router_logits_NE.dtype), top_e_NK


def router_probabilities(router_logits_NE: torch.Tensor) -> torch.Tensor:
    """softmax over experts, in at least float32 (HF: always float32)."""
    return torch.softmax(router_logits_NE.to(torch.promote_types(router_logits_NE.dtype, torch.float32)), dim=-1)


class Experts(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        E, C, F_ = config.num_experts, config.hidden_size, config.moe_intermediate_size
        self.num_experts = E
        self.gate_up_proj = nn.Parameter(torch.empty(E, 2 * F_, C))  # [gate; up] of each expert
        self.down_proj = nn.Parameter(torch.empty(E, C, F_))

    def forward(self, x_NC: torch.Tensor, top_e_NK: torch.Tensor, top_p_NK: torch.Tensor) -> torch.Tensor:
        y_NC = torch.zeros_like(x_NC)
        for e in range(self.num_experts):
            token_n, slot_n = torch.where(top_e_NK == e)  # the tokens routed to e, and which of their k slots
            if token_n.numel() == 0:
                continue
            gate_nF, up_nF = F.linear(x_NC[token_n], self.gate_up_proj[e]).chunk(2, dim=-1)
            out_nC = F.linear(F.silu(gate_nF) * up_nF, self.down_proj[e])
            y_NC = y_NC.index_add(0, token_n, out_nC * top_p_NK[token_n, slot_n, None])
        return y_NC


class SparseMoeBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.experts = Experts(config)
        self.gate = TopKRouter(config)

    def forward(self, x_BTC: torch.Tensor) -> torch.Tensor:
        B, T, C = x_BTC.shape
        x_NC = x_BTC.reshape(B * T, C)
        _, top_p_NK, top_e_NK = self.gate(x_NC)
        return self.experts(x_NC, top_e_NK, top_p_NK).view(B, T, C)


@dataclass(frozen=True, slots=True)
class Routing:
    """One sparse layer's routing of one forward's N = B*T tokens, row-major."""

    router_logits_NE: torch.Tensor
    experts_NK: torch.Tensor


@contextlib.contextmanager
def record_routing(model: nn.Module) -> Iterator[list[Routing]]:
    """Collect the Routing of every sparse layer, in layer order, for the forwards run inside."""
    routing: list[Routing] = []
    routers = [m for m in model.modules() if isinstance(m, TopKRouter)]
    handles = [r.register_forward_hook(lambda _m, _args, out: routing.append(Routing(out[0], out[2]))) for r in routers]
    try:
        yield routing
    finally:
        for handle in handles:
            handle.remove()
