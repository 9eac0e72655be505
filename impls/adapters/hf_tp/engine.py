"""hf_tp: one training step of a transformers model split by transformers' own tensor parallelism.

The model is loaded with `from_pretrained(..., distributed_config=DistributedConfig(tp_plan="auto"), device_mesh=...)`
over the Case's mesh: transformers shards each layer as its `base_model_tp_plan` says (q/k/v/gate/up colwise, o/down
rowwise, the lm_head colwise with its output gathered to the whole vocabulary), on torch's DTensor parallel styles.
The mesh is `init_device_mesh("cpu", (dp, tp), ("dp", "tp"))`: row-major, so rank = dp_rank x tp + tp_rank, the
contract's layout (tp fastest; cp = pp = 1). Every rank of a TP group runs the same rows.

The step is the loop a transformers user writes around such a model (transformers has no Trainer path for a tp-only
mesh): each micro-batch of this data-parallel rank's partition is collated by transformers' own collators (packed:
`DataCollatorWithFlattening`, one row, documents told apart by `position_ids` resets; unpacked:
`DataCollatorForSeq2Seq`), run forward, and its summed next-token cross-entropy, computed here from the gathered
logits in the Case's dtype (transformers' `ForCausalLMLoss` casts the logits to float32: docs/findings.md, H3), is
divided by the global loss-token count and backpropagated. The count is all-reduced over the data-parallel group,
and so are the gradients (each DTensor gradient gathered whole with `full_tensor()` first); log-probs, loss and count
go to rank 0 over the data-parallel group (`dist.*` calls: the collective recorder sees them). No optimizer step.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from transformers import AutoModelForCausalLM, DataCollatorForSeq2Seq, DataCollatorWithFlattening
from transformers.distributed import DistributedConfig

from packcheck.harness.contract import Case, LayoutKind, StepResult
from packcheck.harness.engines import Capabilities, Engine
from packcheck.impls.adapters.hf_common.rows import sample_values, spans
from packcheck.impls.adapters.hf_common.samples import examples
from packcheck.impls.adapters.hf_common.tokenizer import tokenizer_for
from packcheck.impls.adapters.hf_tp.ranks import combine_dp, reduced

DTYPES = {"float64": torch.float64, "float32": torch.float32}
LAYOUTS = frozenset({LayoutKind.PACKED, LayoutKind.UNPACKED})
NO_OPTIMIZER = ("an optimizer step: hf_tp reports one forward/backward (AdamW over DTensor parameters and the "
                "gradient norm over the TP group are not built)")


def whole_tensor(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's full value (gathered over its mesh); a plain tensor as it is."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


class HfTensorParallel(Engine):
    name = "hf_tp"
    engine_versions = ("transformers>=5.24,<6",)
    capabilities = Capabilities(
        families=frozenset({"llama", "qwen3"}),
        layouts=LAYOUTS,
        dtypes=frozenset({"float64", "float32"}),
        max_dp=2,
        max_tp=2,
        optimizer_step=False,
        attention={"auto": LAYOUTS, "sdpa": LAYOUTS},
    )

    def unsupported_reason(self, case: Case) -> str | None:
        if case.optimizer is not None:
            return f"engine does not support {NO_OPTIMIZER}"
        return super().unsupported_reason(case)

    def mesh(self, case: Case):
        """The (dp, tp) device mesh over the launcher's default group, or None for a single process."""
        plan = case.parallel
        world = dist.get_world_size() if dist.is_initialized() else 1
        if world != plan.dp * plan.tp:
            raise RuntimeError(f"dp={plan.dp} x tp={plan.tp} needs {plan.dp * plan.tp} processes in the default group, found "
                               f"{world}: run the case through the harness's launcher (packcheck run), which starts them")
        if world == 1:
            return None
        return init_device_mesh("cpu", (plan.dp, plan.tp), mesh_dim_names=("dp", "tp"))

    def model(self, case: Case, mesh):
        kwargs = dict(dtype=DTYPES[case.dtype], attn_implementation="sdpa")
        if mesh is not None and case.parallel.tp > 1:
            kwargs.update(distributed_config=DistributedConfig(tp_plan="auto", tp_size=case.parallel.tp), device_mesh=mesh)
        return AutoModelForCausalLM.from_pretrained(case.model.checkpoint, **kwargs)

    def collator(self, case: Case):
        if case.layout.kind is LayoutKind.PACKED:
            return DataCollatorWithFlattening()
        return DataCollatorForSeq2Seq(tokenizer_for(case.model.vocab_size, case.layout.padding_side), padding=True,
                                      label_pad_token_id=-100)

    def run(self, case: Case) -> StepResult:
        self.require_supported(case)
        mesh = self.mesh(case)
        dp_group = None if mesh is None or case.parallel.dp == 1 else mesh["dp"].get_group()
        dp_rank = 0 if dp_group is None else dist.get_rank(dp_group)
        model = self.model(case, mesh)
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(not case.model.is_frozen(name))
        data, collate = examples(case), self.collator(case)
        micro_batches = [collate([data[i] for i in mb]) for mb in case.partition.per_rank[dp_rank]]
        local = sum(int((b["labels"][:, 1:] != -100).sum()) for b in micro_batches)
        count = local if dp_group is None else int(reduced(local, dp_group).item())
        logprobs: list[torch.Tensor | None] = [None] * len(case.samples)
        loss_sum = 0.0
        for batch, sample_ids in zip(micro_batches, case.partition.per_rank[dp_rank]):
            inputs = {k: v for k, v in batch.items() if k != "labels"}
            logits_RTV = whole_tensor(model(**inputs).logits)
            logprob_RTV = torch.log_softmax(logits_RTV[:, :-1], dim=-1)
            next_RT = batch["input_ids"][:, 1:]
            logprob_RT = logprob_RTV.gather(-1, next_RT.unsqueeze(-1)).squeeze(-1)
            supervised_RT = batch["labels"][:, 1:] != -100
            loss = -(logprob_RT * supervised_RT).sum() / count
            loss.backward()
            loss_sum += loss.item()
            for span in spans(batch, sample_ids, case.samples):
                values = sample_values(logprob_RT.detach(), span, len(case.samples[span.sample].input_ids))
                values[0] = 0.0  # nothing of this sample precedes token 0
                logprobs[span.sample] = values
        grads = {name: whole_tensor(p.grad).detach().clone() for name, p in model.named_parameters() if p.grad is not None}
        result = StepResult(logprobs=logprobs, loss=loss_sum, num_loss_tokens=count, grads=grads,
                            notes={"tp": case.parallel.tp, "dp": case.parallel.dp})
        return result if dp_group is None else combine_dp(case, result, dp_group)

