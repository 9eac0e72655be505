"""One training step of the reference trainer over a Case: every micro-batch's forwards and
backwards, gradients accumulated, an optional AdamW step, and the StepResult.

`accumulate_gradients` is the forward/backward half on its own, so that `impls.reference.train`
runs many steps through exactly this code with its own model and optimizer persisting.

The pipeline (`pipe`) supplies the replaceable steps (unpad, pack, positions and segments, target
mask, token weight; for policy losses the per-token inputs and the aggregation weights): the
reference engine passes its own, and each mutant replaces exactly one. The counts the loss is
normalised by are the engine's own counts of the targets in the rows it built, over every
micro-batch before the first backward, as a real trainer must.
"""

from __future__ import annotations

import torch

from harness.contract import Case, StepResult
from impls.reference.counts import count_targets
from impls.reference.layouts import plan_forwards
from impls.reference.loss import target_logprobs
from impls.reference.model import CausalLM
from impls.reference.objective import forward_loss
from impls.reference.rows import Rows, build_rows


def build_micro_batches(case: Case, pipe) -> list[list[Rows]]:
    """Rows of every forward of every micro-batch, in execution order."""
    return [
        [build_rows(plans, pipe.positions_and_segments, pipe.target_mask)
         for plans in plan_forwards(case, micro_batch, pipe.pack_rows, pipe.unpad_mask)]
        for micro_batch in case.partition.micro_batches
    ]


class SampleScatter:
    """Collects row-level per-token values back into per-sample tensors in original order."""

    def __init__(self, dtype: torch.dtype):
        self.logprobs: dict[int, torch.Tensor] = {}
        self.dloss: dict[int, torch.Tensor] = {}
        self.dtype = dtype

    def add(self, rows: Rows, lp_BT: torch.Tensor, dloss_BT: torch.Tensor) -> None:
        sample_BT, token_BT = rows.sample_BT, rows.token_BT
        for sample in sample_BT.unique().tolist():
            if sample < 0:
                continue
            where = sample_BT == sample
            order = token_BT[where].argsort()
            lp = lp_BT.detach().cpu()[where][order].to(self.dtype)
            lp[0] = 0.0  # token 0 is predicted from another document or padding: not a log-prob of this sample
            self.logprobs[sample] = lp
            self.dloss[sample] = dloss_BT.cpu()[where][order].to(self.dtype)

    def ordered(self, values: dict[int, torch.Tensor]) -> list[torch.Tensor]:
        return [values[i] for i in sorted(values)]


def accumulate_gradients(model: CausalLM, case: Case, pipe, attention: str,
                         scatter: SampleScatter | None = None) -> tuple[float, int]:
    """Forwards and backwards of every micro-batch into `.grad`: the global loss and loss-token count."""
    device = next(model.parameters()).device
    micro_batches = build_micro_batches(case, pipe)
    counts = count_targets(micro_batches)
    model.zero_grad(set_to_none=True)
    total_loss = 0.0
    for forwards, micro_counts in zip(micro_batches, counts):
        for rows in forwards:
            logits_BTV = model(rows.input_ids_BT.to(device), rows.position_ids_BT.to(device), rows.segment_ids_BT.to(device), attention)
            lp_BT = target_logprobs(logits_BTV, rows.input_ids_BT.to(device))
            lp_BT.retain_grad()
            loss = forward_loss(case, pipe, rows, logits_BTV, lp_BT, micro_counts)
            loss.backward()
            total_loss += loss.item()
            if scatter is not None:
                scatter.add(rows, lp_BT, lp_BT.grad)
    return total_loss, counts[0].global_tokens


def train_step(model: CausalLM, case: Case, pipe, attention: str) -> StepResult:
    scatter = SampleScatter(next(model.parameters()).dtype)
    total_loss, global_tokens = accumulate_gradients(model, case, pipe, attention, scatter)
    grads = {name: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().cpu().clone() for name, p in model.named_parameters()}
    params_after = None
    if case.optimizer is not None:
        spec = case.optimizer
        torch.optim.AdamW(model.parameters(), lr=spec.lr, betas=spec.betas, eps=spec.eps, weight_decay=spec.weight_decay).step()
        params_after = {name: p.detach().cpu().clone() for name, p in model.named_parameters()}
    return StepResult(
        logprobs=scatter.ordered(scatter.logprobs),
        loss=total_loss,
        num_loss_tokens=global_tokens,
        grads=grads,
        dloss_dlogprobs=scatter.ordered(scatter.dloss),
        params_after=params_after,
    )
