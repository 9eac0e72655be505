"""verl's outputs in the harness's terms: per-sample log-probs and loss weights, full gradients.

verl computes log-probs on the flattened micro-batch with labels `roll(input_ids, -1)`: entry t of
a row is log p(row[t+1] | row[:t+1]), and the row's *last* entry predicts the first token of the
next row of the micro-batch (the last row wraps to the first). The harness's entry t is
log p(x_t | x_<t), so row entries 0..L-2 become sample entries 1..L-1, entry 0 is 0.0, and the
last entry is a prediction *of the next row's token 0*: its loss weight is reported as that
sample's `dloss_dlogprobs[0]`, which the contract defines as exactly that (non-zero only if a
label crossed a boundary). Nothing verl computed is dropped from the weights.
"""

from __future__ import annotations

from importlib.metadata import version

import torch
import torch.distributed as dist

from packcheck.harness.contract import Case


def verl_version() -> str:
    return version("verl")


class LogprobTap:
    """verl's loss function, unchanged, with its log-prob input kept for reading d loss / d log-prob.

    verl returns the log-probs detached; the tap passes the loss an identical nested tensor whose
    values are a non-leaf that retains its gradient (x + 0 is exact), one per micro-batch in order.
    """

    def __init__(self, loss_function):
        self.loss_function = loss_function
        self.tapped: list[torch.Tensor] = []

    def __call__(self, model_output, data, dp_group=None):
        log_probs = model_output["log_probs"]
        values = log_probs.values() + 0.0
        values.retain_grad()
        self.tapped.append(values)
        tapped = torch.nested.nested_tensor_from_jagged(values, log_probs.offsets())
        return self.loss_function(model_output={**model_output, "log_probs": tapped}, data=data, dp_group=dp_group)

    @property
    def grads(self) -> list[torch.Tensor]:
        return [t.grad.detach() if t.grad is not None else torch.zeros_like(t) for t in self.tapped]


def _full(t: torch.Tensor) -> torch.Tensor:
    full = t.full_tensor() if hasattr(t, "full_tensor") else t  # FSDP2 shards every parameter as a DTensor
    return full.detach().cpu().clone()


def full_gradients(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: _full(p.grad) if p.grad is not None else torch.zeros(p.shape) for name, p in module.named_parameters()}


def full_parameters(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: _full(p) for name, p in module.named_parameters()}


def all_reduce_sum(value: float) -> float:
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return t.item()


def per_sample(case: Case, batch, log_probs: torch.Tensor, grads: list[torch.Tensor], dp: int):
    """Per-sample log-probs and d loss / d log-prob in original order, summed over the data-parallel ranks.

    `log_probs` is verl's nested [rows, j] output for this rank; `grads` the tapped gradients per
    micro-batch. verl's loss is each rank's share times dp and FSDP averages gradients over dp, so the
    weight of a token in the global loss is its tapped gradient / dp.
    """
    lengths = [len(s.input_ids) for s in case.samples]
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    lp_flat = torch.zeros(offsets[-1], dtype=torch.float64)
    weight_flat = torch.zeros(offsets[-1], dtype=torch.float64)
    stray = torch.zeros(1, dtype=torch.float64)  # weight put on predictions of inert rows' tokens (must stay 0)
    rows = batch.rows
    for row, (slot, lp) in enumerate(zip(rows, log_probs.unbind())):
        if slot is not None:
            lp_flat[offsets[slot] + 1: offsets[slot + 1]] = lp[:-1].double().cpu()
    row = 0
    for micro_slots, g in zip(batch.slots, grads):
        g = g.double().cpu() / dp
        start = 0
        for k, slot in enumerate(micro_slots):
            n = lengths[slot] if slot is not None else 1
            g_row = g[start: start + n]
            start += n
            following = micro_slots[(k + 1) % len(micro_slots)]  # the row whose token 0 this row's last entry predicts
            if slot is not None:
                weight_flat[offsets[slot] + 1: offsets[slot + 1]] += g_row[:-1]
            elif g_row[:-1].numel():
                stray += g_row[:-1].abs().sum()
            if following is not None:
                weight_flat[offsets[following]] += g_row[-1]
            else:
                stray += g_row[-1].abs()
        assert start == g.numel(), f"micro-batch {row}: {g.numel()} log-probs for {start} tokens"
        row += 1
    if dist.get_world_size() > 1:
        for t in (lp_flat, weight_flat, stray):
            dist.all_reduce(t)
    if stray.item() != 0.0:
        raise RuntimeError(f"verl put loss weight {stray.item():.3g} on the inert rows that fill micro-batches: the adapter's "
                           "fill is not inert, so the partition cannot be translated this way")
    logprobs = [lp_flat[offsets[i]: offsets[i + 1]].clone() for i in range(len(lengths))]
    weights = [weight_flat[offsets[i]: offsets[i + 1]].clone() for i in range(len(lengths))]
    dtype = log_probs.values().dtype
    return [t.to(dtype) for t in logprobs], [t.to(dtype) for t in weights]
