"""packcheck adapter for prime-rl's RL trainer (`src/prime_rl/trainer/rl/train.py`), from a source
checkout (source.py; PACKCHECK_PRIME_RL_SRC).

`train.py::train` is one loop that hard-codes CUDA, FSDP and the orchestrator's transport, so one
`run` drives its pieces in the order the loop calls them, for one optimizer step:
- data: the Case's samples as `TrainingSample`s, packed by `prepare_sample`,
  `packed_samples_into_micro_bs` and `pad_micro_batch` (batch.py);
- the model: prime-rl's own Llama / Qwen3 classes (`trainer/models/*/modeling_*.py`), which turn
  `seq_lens` into flash-attention `cu_seqlens`, loaded with `attn_implementation="flash_attention_2"`,
  and `inject_prime_lm_head(chunk_size=None)` (the vanilla head, which keeps the model's dtype);
- the normalisers: every loss component's token count over this rank's micro-batches, all-reduced
  over the dp x cp group before the first backward (train.py ~l.300);
- per micro-batch: `shift_tensor_left` labels; under context parallelism `setup_cp_params` (Ulysses,
  after `substitute_ulysses_attn` on the cp group), `shard_for_cp` of labels and temperatures, and
  `gather_for_cp` of the log-probs; `selective_log_softmax` of logits / temperature,
  `shift_tensor_right`, and `compute_loss` over the per-sample split (`sequence_lengths`): the rl
  component through `setup_rl_loss_fn` (a `CustomLossConfig` with the clipped surrogate, ppo_loss.py),
  an SFT sample as prime-rl's ce component (masked NLL, `ce_weights` on the loss mask);
- gradients summed over all ranks, which is what FSDP's average times `fsdp_gradient_divide_factor`
  (dp x cp) gives; then clipping by `clip_grad_norm_` and torch's AdamW (prime-rl's `setup_optimizer`
  builds the same torch optimizer; its FSDP wrapping is not used on CPU).
What is not prime-rl's: the CPU stand-ins (cpu_stubs.py, varlen.py), torch.compile held eager
(`force_eager`: it changes no value), and in the main adapter two casts to float32 left out so that
a float64 model stays float64 (`forward()`'s `cast_float_and_contiguous`, the float32 data streams):
the `prime_rl.fused-lm-head` variant keeps prime-rl's default precision path and measures it.

Mesh: global rank = dp_rank * cp + cp_rank (harness/launch), a (dp, cp) DeviceMesh.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import torch
import torch.distributed as dist

from packcheck.harness.contract import Aggregation, Case, LayoutKind, LossKind, StepResult
from packcheck.harness.engines import Capabilities, Engine, FindingKind, KnownFinding
from packcheck.impls.adapters.prime_rl import batch, cpu_stubs, source

DTYPES = {"float64": torch.float64}  # float32 not measured, so not declared
LAYOUTS = frozenset({LayoutKind.PACKED, LayoutKind.UNPACKED})
MODEL_CLASSES = {"llama": "prime_rl.trainer.models.llama:LlamaForCausalLM",
                 "qwen3": "prime_rl.trainer.models.qwen3:Qwen3ForCausalLM"}
NORMS_UPSTREAM = "none found (by design, as in transformers)"
NORMS_EVIDENCE = ("prime-rl 559b447 src/prime_rl/trainer/models/layers/norms.py: RMSNorm.forward casts to torch.float32; "
                  "layers/rotary_emb.py computes the angles in float32 under the comment 'Force float32'")
NORMS_SUMMARY = ("prime-rl's own Llama / Qwen3 classes compute RMSNorm and the RoPE angles in float32 even in a float64 model, "
                 "so they meet the reference's exact float64 values only to float32 precision")


def float32_norms(scenario: str, min_margin: float, measured: str) -> KnownFinding:
    return KnownFinding(id="P1", kind=FindingKind.DESIGN_CHOICE, evidence=NORMS_EVIDENCE, scenario=scenario, summary=NORMS_SUMMARY,
                        upstream=NORMS_UPSTREAM, min_margin=min_margin, measured=measured)


class PrimeRL(Engine):
    name = "prime_rl"
    capabilities = Capabilities(
        families=frozenset(MODEL_CLASSES),
        layouts=LAYOUTS,
        dtypes=frozenset(DTYPES),
        devices=frozenset({"cpu"}),
        losses=frozenset({LossKind.SFT_TOKEN_MEAN, LossKind.PPO_CLIP}),
        # compute_loss divides every component by its global token count: token-mean is the only mode
        aggregations=frozenset({Aggregation.TOKEN_MEAN}),
        # LossInputs carries no distribution, so a custom loss cannot add an entropy bonus
        loss_terms=frozenset({"dual_clip", "kl"}),
        max_dp=2,
        max_cp=4,
        cp_styles=frozenset({"ulysses"}),  # ring needs ring_flash_attn (CUDA)
        reports=frozenset({"dloss_dlogprobs", "params_after", "grad_norm"}),
        attention={"auto": LAYOUTS, "flash_attention_2": LAYOUTS},
    )
    known_findings = (  # measured with `packcheck run --engine prime_rl --family llama qwen3` at 559b447, float64
        float32_norms("golden_regression", 3.0e2, "log-probs max_abs 3.0e-7 (margin 3.0e3) llama, 4.7e-7 (4.7e3) qwen3; "
                      "grad max_rel 2.9e-7 llama, float64"),
        float32_norms("gradient_oracle", 3.0e2, "log-probs max_abs 3.0e-7 (margin 3.0e3) llama, 4.7e-7 (4.7e3) qwen3 against "
                      "the reference's oracle arms, float64"),
    )
    engine_versions = ("transformers>=5.6,<6",)  # prime-rl 559b447 pins transformers==5.6.2
    fused_lm_head: int | None = None  # inject_prime_lm_head's chunk_size: None = the vanilla head
    float32_casts = False  # forward()'s cast_float_and_contiguous and DataLoader's float32 streams

    def __init__(self) -> None:
        source.checkout()  # without PACKCHECK_PRIME_RL_SRC the engine does not start, and says why

    def unsupported_reason(self, case: Case) -> str | None:
        reason = super().unsupported_reason(case)
        if reason is not None:
            return reason
        if case.layout.padding_side == "left":
            return "prime-rl pads at the end only (pad_micro_batch appends the padding to the last document's segment)"
        if case.parallel.cp > 1:
            config = json.loads((Path(case.model.checkpoint) / "config.json").read_text())
            heads, kv_heads, cp = config["num_attention_heads"], config["num_key_value_heads"], case.parallel.cp
            if heads % cp or (kv_heads % cp and cp % kv_heads):
                return (f"prime-rl's Ulysses needs cp to divide the {heads} attention heads and to divide or be divided by "
                        f"the {kv_heads} key/value heads (ulysses_attn.py); cp={cp} does not")
        return None

    # -- pieces a variant replaces --------------------------------------------------------------
    def loss_config(self, case: Case):
        from prime_rl.configs.trainer import CustomLossConfig

        spec = case.loss
        return CustomLossConfig(import_path="packcheck.impls.adapters.prime_rl.ppo_loss.ppo_clip_loss",
                                kwargs={"clip_low": spec.clip_low, "clip_high": spec.clip_high,
                                        "dual_clip": spec.dual_clip, "kl_coef": spec.kl_coef})

    def reported_loss(self, local_loss: float, plan) -> float:
        """The step's loss: every rank's micro-batch losses summed (each cp rank holds L / cp of its rows)."""
        return all_reduce_sum(local_loss, self.world_group(plan))

    @staticmethod
    def world_group(plan):
        return dist.group.WORLD if plan.world_size > 1 else None

    # -- the step -------------------------------------------------------------------------------
    def build_model(self, case: Case, dtype: torch.dtype):
        import importlib

        from prime_rl.trainer.models.layers.lm_head import inject_prime_lm_head

        module, _, cls = MODEL_CLASSES[case.model.family].partition(":")
        model_cls = getattr(importlib.import_module(module), cls)
        model = model_cls.from_pretrained(case.model.checkpoint, dtype=dtype, attn_implementation="flash_attention_2")
        inject_prime_lm_head(model, chunk_size=self.fused_lm_head)
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(not case.model.is_frozen(name))
        model.train()
        return model

    def run(self, case: Case) -> StepResult | None:
        self.require_supported(case)
        source.load()
        with torch.compiler.set_stance("force_eager"):
            return self._run(case)

    def _run(self, case: Case) -> StepResult | None:
        plan = case.parallel
        cp_group = None
        if plan.cp > 1:
            from torch.distributed.device_mesh import init_device_mesh

            mesh = init_device_mesh("cpu", (plan.dp, plan.cp), mesh_dim_names=("dp", "cp"))
            cp_group = mesh["cp"].get_group()
        with ulysses_attention(cp_group):
            return self._step(case, cp_group)

    def _step(self, case: Case, cp_group) -> StepResult | None:
        from prime_rl.trainer.rl.loss import compute_loss, selective_log_softmax, setup_rl_loss_fn, shift_tensor_left, shift_tensor_right
        from prime_rl.utils.cp import gather_for_cp, setup_cp_params, shard_for_cp

        plan = case.parallel
        dtype = DTYPES[case.dtype]
        stream_dtype = torch.float32 if self.float32_casts else dtype
        world = self.world_group(plan)
        rank = dist.get_rank() if world is not None else 0
        dp_rank, cp_rank = divmod(rank, plan.cp)
        model = self.build_model(case, dtype)
        vocab = model.config.vocab_size
        rl_loss_fn = setup_rl_loss_fn(self.loss_config(case)) if case.loss.is_policy else None

        rows = [row for mb in case.partition.per_rank[dp_rank] for row in batch.rows_for(case, mb, plan.cp, stream_dtype)]
        # train.py: each component's count over this rank's micro-batches, summed over dp x cp
        local = [0, 0, 0]
        for row in rows:
            mask, rl_w, ce_w = row.tensors["loss_mask"], row.tensors["rl_weights"], row.tensors["ce_weights"]
            local[0] += int((mask & (rl_w != 0)).sum()) if rl_w is not None else int(mask.sum())
            local[1] += int((ce_w != 0).sum()) if ce_w is not None else 0
        scales = torch.tensor(local, dtype=torch.int64)
        if world is not None:
            dist.all_reduce(scales, group=world)
        rl_scale, ce_scale, ref_kl_scale = (max(int(s), 1) for s in scales.tolist())

        logprobs = [torch.zeros(len(s.input_ids), dtype=torch.float64) for s in case.samples]
        dloss = [torch.zeros(len(s.input_ids), dtype=torch.float64) for s in case.samples]
        model.zero_grad(set_to_none=True)
        local_loss = 0.0
        for row in rows:
            t = row.tensors
            input_ids, position_ids, temperatures = t["input_ids"], t["position_ids"], t["temperatures"]
            labels = shift_tensor_left(input_ids)
            pre_shard = False
            if cp_group is not None:
                input_ids, position_ids = setup_cp_params(input_ids, position_ids, cp_rank, plan.cp, cp_group,
                                                          seq_lens=t["seq_lens"], cp_style="ulysses")
                pre_shard = True
                labels = shard_for_cp(labels, cp_rank=cp_rank, cp_world_size=plan.cp)
                temperatures = shard_for_cp(temperatures, cp_rank=cp_rank, cp_world_size=plan.cp)
            out = self.forward(model, input_ids, position_ids, labels, temperatures, t["seq_lens"], pre_shard)
            if out.get("logprobs") is None:
                out["logprobs"] = selective_log_softmax(out["logits"] / temperatures.unsqueeze(-1), labels)
            if cp_group is not None:
                out["logprobs"] = gather_for_cp(out["logprobs"], cp_group)
            row_logprobs = shift_tensor_right(out["logprobs"], pad_value=torch.log(torch.tensor(1.0 / vocab)).item())
            row_logprobs.retain_grad()

            def split(name):
                return t[name].squeeze(0).split(row.sequence_lengths) if t[name] is not None else None

            loss, _ = compute_loss(
                trainer_logprobs=row_logprobs.squeeze(0).split(row.sequence_lengths),
                inference_logprobs=split("inference_logprobs"), ref_logprobs=split("ref_logprobs"),
                advantages=split("advantages"), loss_mask=split("loss_mask"), rl_weights=split("rl_weights"),
                ce_weights=split("ce_weights"), ref_kl_weights=split("ref_kl_weights"),
                rl_loss_fn=rl_loss_fn, rl_scale=rl_scale, ce_scale=ce_scale, ref_kl_scale=ref_kl_scale,
            )
            loss.backward()
            local_loss += float(loss.detach())
            self.scatter(row, row_logprobs.detach(), logprobs if cp_rank == 0 else None, first=1)
            self.scatter(row, row_logprobs.grad, dloss, first=0)

        grads, trainable = {}, []
        for name, parameter in model.named_parameters():
            if not parameter.requires_grad:
                continue
            grad = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
            if world is not None:  # FSDP's average over dp x cp, undone by fsdp_gradient_divide_factor: a sum
                dist.all_reduce(grad, group=world)
            parameter.grad = grad
            grads[name] = grad.detach().clone()
            trainable.append(parameter)
        if world is not None:
            for tensors in (logprobs, dloss):
                flat = torch.cat(tensors)
                dist.all_reduce(flat, group=world)
                tensors[:] = list(flat.split([len(s.input_ids) for s in case.samples]))
        loss_value = self.reported_loss(local_loss, plan)
        params_after, grad_norm = None, None
        if case.optimizer is not None:
            spec = case.optimizer
            grad_norm = float(torch.nn.utils.clip_grad_norm_(trainable, spec.max_grad_norm if spec.clips else math.inf))
            torch.optim.AdamW(trainable, lr=spec.lr, betas=spec.betas, eps=spec.eps, weight_decay=spec.weight_decay).step()
            params_after = {name: p.detach().clone() for name, p in model.named_parameters()}
        if rank != 0:
            return None
        count = rl_scale if case.loss.is_policy else ce_scale
        return StepResult(
            logprobs=[lp.to(dtype) for lp in logprobs],
            loss=loss_value,
            num_loss_tokens=count // plan.cp,  # each token is counted once per cp rank (full-row masks on every rank)
            grads=grads,
            dloss_dlogprobs=[d.to(dtype) for d in dloss],
            params_after=params_after,
            grad_norm=grad_norm,
            notes={"prime_rl_commit": source.commit(), "count_all_reduced": count, "rows": len(rows)},
        )

    def forward(self, model, input_ids, position_ids, labels, temperature, seq_lens, pre_shard) -> dict:
        """trainer/model.py::forward for prime-rl's own model classes, without its float32 cast unless asked."""
        out = model(input_ids=input_ids, position_ids=position_ids, labels=labels, temperature=temperature,
                    seq_lens=seq_lens, seq_lens_are_pre_shard=pre_shard)
        if self.float32_casts:
            from prime_rl.trainer.models.layers.lm_head import cast_float_and_contiguous

            return dict(cast_float_and_contiguous(out))
        return dict(out)

    @staticmethod
    def scatter(row: batch.Row, row_values_1T: torch.Tensor, into: list[torch.Tensor] | None, first: int) -> None:
        """Add a row's per-position values to their samples' tokens from token `first` on (a log-prob's
        token 0 is predicted from the previous document or nothing: the contract reports 0.0)."""
        if into is None:
            return
        values = row_values_1T.reshape(-1).to(torch.float64)
        start = 0
        for length in row.sequence_lengths:
            owner = row.sample_of_token[start]
            if owner is not None:
                n = len(into[owner])
                into[owner][first:] += values[start + first:start + n]
            start += length


@contextlib.contextmanager
def ulysses_attention(cp_group):
    """`substitute_ulysses_attn(cp_group)` for the block (nothing when cp_group is None), then the class's own
    attention again: the patch is global, and the harness runs later cases (other meshes) in the same process."""
    if cp_group is None:
        yield
        return
    from prime_rl.trainer.models.layers.attn import FlashAttention
    from prime_rl.trainer.models.layers.ulysses_attn import substitute_ulysses_attn

    original = FlashAttention.__dict__["_compute_attention"]
    with cpu_stubs.ulysses_imports():
        substitute_ulysses_attn(cp_group)
    try:
        yield
    finally:
        FlashAttention._compute_attention = original


def all_reduce_sum(value: float, group) -> float:
    if group is None:
        return value
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, group=group)
    return float(t.item())
