"""hf_tp: one training step of a transformers model split by transformers' own tensor parallelism.

The model is loaded with `from_pretrained(..., distributed_config=DistributedConfig(tp_plan="auto", tp_size=tp))`:
transformers builds its device mesh over the launcher's gloo world and shards each layer as the family's
`base_model_tp_plan` says (q/k/v/gate/up colwise, o/down rowwise, qwen3's q/k-norm `replicated_with_grad_allreduce`,
the lm_head `colwise_gather_output`: logits gathered to the whole vocabulary), on torch's DTensor parallel styles.
Every rank runs the same rows. Measured to run on CPU over gloo in float64 with the backward (transformers 5.24.0,
torch 2.13.0).

The step is the loop a transformers user writes around such a model: each micro-batch of the Case's partition is
collated by transformers' own collators (packed: `DataCollatorWithFlattening`, one row, documents told apart by
`position_ids` resets; unpacked: `DataCollatorForSeq2Seq`), run forward, and its summed next-token cross-entropy,
computed here from the gathered logits in the Case's dtype (transformers' `ForCausalLMLoss` casts the logits to
float32: docs/findings.md, H3), is divided by the step's loss-token count and backpropagated. Each gradient is
reported whole (`DTensor.full_tensor()`). Every rank returns the same StepResult; no optimizer step.

DTensor reduces through functional collectives (`torch.ops._c10d_functional`), which the collective recorder logs as the
torch.distributed ops they perform (harness/collectives/functional.py): a tp arm's trace shows each layer's reductions
over the TP group, and `unused_tensor_parallel` judges it on them (docs/adapters.md, hf_tp).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM, DataCollatorForSeq2Seq, DataCollatorWithFlattening
from transformers.distributed import DistributedConfig

from packcheck.harness.contract import Case, LayoutKind, StepResult
from packcheck.harness.engines import Capabilities, Engine, FindingKind, KnownFinding
from packcheck.impls.adapters.hf_common import float32_inside
from packcheck.impls.adapters.hf_common.rows import sample_values, spans
from packcheck.impls.adapters.hf_common.samples import examples
from packcheck.impls.adapters.hf_common.tokenizer import tokenizer_for

DTYPES = {"float64": torch.float64, "float32": torch.float32}
LAYOUTS = frozenset({LayoutKind.PACKED, LayoutKind.UNPACKED})
NO_DP = ("dp > 1: transformers 5.24's from_pretrained builds its device mesh over the whole world (initialize_distributed_mesh: "
         "pp x dp_replicate x fsdp x tp must equal WORLD_SIZE) and ignores a device_mesh passed beside it, so a TP group "
         "smaller than the world needs its FSDP2/HSDP path (DistributedConfig(dp_replicate_size=...)), which hf_tp does not build")
NO_OPTIMIZER = ("an optimizer step: hf_tp reports one forward/backward (AdamW over DTensor parameters and the "
                "gradient norm over the TP group are not built)")


def whole_tensor(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's full value (gathered over its mesh); a plain tensor as it is."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


# what the float64 oracle sees of any transformers model in float64, here as in ringmaster_cp (R2); tp_vs_notp is exact
FLOAT32_NORM_AND_ROPE = KnownFinding(
    id="H9",
    kind=FindingKind.DESIGN_CHOICE,
    scenario="oracle_agreement",
    summary=("a transformers model loaded in float64 (here split by transformers' own TP) still computes RMSNorm and RoPE in "
             "float32, so it meets the float64 oracle only to float32 precision; its tp2 arms equal its single process to 9e-16"),
    evidence=float32_inside.EVIDENCE,
    upstream=float32_inside.UPSTREAM,
    min_margin=3e2,
    measured="log-probs max-abs 3.8e-7 (margin 3.8e3), grad rel 7e-8 to 3e-7, llama and qwen3, float64, 2026-12-07",
)


class HfTensorParallel(Engine):
    name = "hf_tp"
    engine_versions = ("transformers>=5.24,<6",)
    capabilities = Capabilities(
        families=frozenset({"llama", "qwen3"}),
        layouts=LAYOUTS,
        dtypes=frozenset({"float64", "float32"}),
        max_tp=2,
        optimizer_step=False,
        attention={"auto": LAYOUTS, "sdpa": LAYOUTS},
    )
    known_findings = (FLOAT32_NORM_AND_ROPE,)

    def unsupported_reason(self, case: Case) -> str | None:
        if case.optimizer is not None:
            return f"engine does not support {NO_OPTIMIZER}"
        if case.parallel.dp > 1:
            return f"engine does not support {NO_DP}"
        return super().unsupported_reason(case)

    def check_world(self, case: Case) -> None:
        world = dist.get_world_size() if dist.is_initialized() else 1
        if world != case.parallel.tp:
            raise RuntimeError(f"tp={case.parallel.tp} needs {case.parallel.tp} processes in the default group, found {world}: "
                               "run the case through the harness's launcher (packcheck run), which starts them")

    def model(self, case: Case):
        kwargs = dict(dtype=DTYPES[case.dtype], attn_implementation="sdpa")
        if case.parallel.tp > 1:  # transformers builds the ("pp", "dp_replicate", "fsdp", "tp") mesh over the whole world
            kwargs.update(distributed_config=DistributedConfig(tp_plan="auto", tp_size=case.parallel.tp))
        return AutoModelForCausalLM.from_pretrained(case.model.checkpoint, **kwargs)

    def collator(self, case: Case):
        if case.layout.kind is LayoutKind.PACKED:
            return DataCollatorWithFlattening()
        return DataCollatorForSeq2Seq(tokenizer_for(case.model.vocab_size, case.layout.padding_side), padding=True,
                                      label_pad_token_id=-100)

    def run(self, case: Case) -> StepResult:
        self.require_supported(case)
        self.check_world(case)
        model = self.model(case)
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(not case.model.is_frozen(name))
        data, collate = examples(case), self.collator(case)
        micro_batches = [collate([data[i] for i in mb]) for mb in case.partition.per_rank[0]]
        count = sum(int((b["labels"][:, 1:] != -100).sum()) for b in micro_batches)
        logprobs: list[torch.Tensor | None] = [None] * len(case.samples)
        loss_sum = 0.0
        for batch, sample_ids in zip(micro_batches, case.partition.per_rank[0]):
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
        return StepResult(logprobs=logprobs, loss=loss_sum, num_loss_tokens=count, grads=grads,
                          notes={"tp": case.parallel.tp, "transformers_tp_plan": "auto"})

