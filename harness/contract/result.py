"""StepResult: what an engine reports for one Case, in the harness's canonical terms.

- `logprobs[i]`: float tensor [len(sample i)], aligned to the sample's input_ids, in original
  sample order: entry t is log p(x_t | x_<t); entry 0 is 0.0 (nothing precedes token 0).
- `loss`: the global loss as the engine reports it.
- `num_loss_tokens`: the number of loss tokens the engine counted over the whole global batch.
- `grads`: the gradient of the global loss per canonical (Hugging Face) parameter name, full
  tensors (tiny models).
- `dloss_dlogprobs[i]` (optional): d loss / d logprobs[i], the weight each token's log-prob has in
  the loss the engine actually backpropagated; it shows exactly which tokens were in the loss.
- `params_after` (optional): parameters after the optimizer step, when the Case asks for one.
- `collectives` (optional): per-rank list of the collectives the engine issued.
- `aux_loss` (optional, MoE): the load-balancing auxiliary loss over the global batch (docs/contract.md
  says which tokens), reported beside `loss`, which stays the loss spec's loss.
- `router_tokens_per_expert` (optional, MoE): int64 tensor [sparse layers, experts], the global number
  of top-k assignments of real (non-padding) tokens to each expert.
- `advantages` (optional; only where the Case's loss has an advantage estimator): float tensor [num samples], the
  advantage the engine computed for each sample from the rewards and groups, in original sample order.
- `grad_norm` (optional; required when the Case's optimizer clips): the global L2 norm of the gradient
  before clipping, over every trainable parameter and every rank/shard, as the engine computed it
  for clipping (harness/contract/optimizer.py).
- `param_digests` (filled by the harness, never by the engine): in a distributed case that takes an optimizer step,
  per rank the digest the launch worker made of that rank's own `params_after` (harness/compare/param_digest.py), None
  for a rank that returned none. An engine's own value is discarded, as its `collectives` are.

Serialised as safetensors (tensors) + JSON (everything else); never pickle.

torch is imported only for annotations and by save and load: the contract is imported by every command, and
`packcheck list` or `explain` should not wait 2.4 s for a library it never calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

SCHEMA = "packcheck.step_result/1"
OPTIONAL_REPORTS = ("dloss_dlogprobs", "params_after", "collectives", "aux_loss", "router_tokens_per_expert", "grad_norm", "advantages")


@dataclass(kw_only=True, slots=True)
class StepResult:
    logprobs: list[torch.Tensor]
    loss: float
    num_loss_tokens: int
    grads: dict[str, torch.Tensor]
    dloss_dlogprobs: list[torch.Tensor] | None = None
    params_after: dict[str, torch.Tensor] | None = None
    collectives: list[list[dict]] | None = None
    aux_loss: float | None = None
    router_tokens_per_expert: torch.Tensor | None = None
    grad_norm: float | None = None
    advantages: torch.Tensor | None = None
    notes: dict = field(default_factory=dict)
    param_digests: list[dict | None] | None = None

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor of the result by its stored name (`logprobs.I`, `grad.NAME`, `dloss_dlogprobs.I`, `param.NAME`,
        `router_tokens_per_expert`, `advantages`): what `meta` leaves out."""
        tensors = {f"logprobs.{i}": t for i, t in enumerate(self.logprobs)}
        tensors |= {f"grad.{name}": t for name, t in self.grads.items()}
        for i, t in enumerate(self.dloss_dlogprobs or ()):
            tensors[f"dloss_dlogprobs.{i}"] = t
        for name, t in (self.params_after or {}).items():
            tensors[f"param.{name}"] = t
        if self.router_tokens_per_expert is not None:
            tensors["router_tokens_per_expert"] = self.router_tokens_per_expert
        if self.advantages is not None:
            tensors["advantages"] = self.advantages
        return tensors

    def meta(self) -> dict:
        """Everything but the tensors, as JSON data (result.json)."""
        return {
            "schema": SCHEMA,
            "loss": self.loss,
            "num_loss_tokens": self.num_loss_tokens,
            "num_samples": len(self.logprobs),
            "has_dloss_dlogprobs": self.dloss_dlogprobs is not None,
            "has_params_after": self.params_after is not None,
            "collectives": self.collectives,
            "aux_loss": self.aux_loss,
            "grad_norm": self.grad_norm,
            "notes": self.notes,
        } | ({"param_digests": self.param_digests} if self.param_digests is not None else {})  # unset: result.json as before

    def save(self, directory: str | Path) -> None:
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_file(unshared(self.tensors()), str(directory / "result.safetensors"))
        (directory / "result.json").write_text(json.dumps(self.meta(), indent=1))

    @classmethod
    def load(cls, directory: str | Path) -> StepResult:
        from safetensors.torch import load_file

        directory = Path(directory)
        return cls.from_parts(read_meta(directory), load_file(str(directory / "result.safetensors")), str(directory))

    @classmethod
    def from_parts(cls, meta: dict, tensors: dict[str, torch.Tensor], source: str = "the result") -> StepResult:
        """A result from its `meta` and its `tensors` (by stored name), wherever the tensors were kept."""
        if meta.get("schema") != SCHEMA:
            raise ValueError(f"{source}/result.json has schema {meta.get('schema')!r}, expected {SCHEMA!r}")
        n = meta["num_samples"]

        def prefixed(prefix: str) -> dict[str, torch.Tensor]:
            return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}

        return cls(
            logprobs=[tensors[f"logprobs.{i}"] for i in range(n)],
            loss=meta["loss"],
            num_loss_tokens=meta["num_loss_tokens"],
            grads=prefixed("grad."),
            dloss_dlogprobs=[tensors[f"dloss_dlogprobs.{i}"] for i in range(n)] if meta["has_dloss_dlogprobs"] else None,
            params_after=prefixed("param.") if meta["has_params_after"] else None,
            collectives=meta["collectives"],
            aux_loss=meta.get("aux_loss"),  # absent from results saved before MoE families
            router_tokens_per_expert=tensors.get("router_tokens_per_expert"),
            grad_norm=meta.get("grad_norm"),  # absent from results saved before clipping was in the contract
            advantages=tensors.get("advantages"),
            notes=meta["notes"],
            param_digests=meta.get("param_digests"),  # absent from results saved before replicas were compared
        )


def read_meta(directory: Path) -> dict:
    return json.loads((directory / "result.json").read_text())


def unshared(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each tensor detached, on the CPU and contiguous, a copy where its storage was already saved under another name:
    safetensors refuses one tensor under two names ("Some tensors share memory"), which an engine with tied weights
    returns, and the harness's save once crashed on it and blamed the engine."""
    kept, seen = {}, set()
    for name, tensor in tensors.items():
        tensor = tensor.detach().cpu().contiguous()
        storage = (tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes())
        kept[name] = tensor.clone() if storage in seen and storage[1] else tensor
        seen.add(storage)
    return kept
