"""verl_fsdp: verl 0.9.x's new-engine FSDP2 trainer (`FSDPEngineWithLMHead`) behind packcheck's Engine.

One `run` is one verl optimizer step, the way verl's own trainers drive it: a fresh engine
loads the Case's checkpoint, `forward_backward_batch(data, loss_function)` runs every micro-batch
of this rank with verl's own loss (`sft_loss`, or `ppo_loss` for a policy loss: policy.py), and,
when asked, `optimizer_step()` applies AdamW.
The adapter only translates: the Case into verl's TensorDict (batch.py), verl's per-row log-probs
and gradients back into a StepResult (results.py). What it does *not* take from verl is said where
it happens.

Settings that matter for an exact comparison (and why):
- float32 parameters and compute: verl's `PrecisionType` knows fp16/bf16/fp32 only, so float64 cannot
  be expressed without patching verl;
- `attn_implementation="sdpa"`: verl defaults to flash-attention 2, which has no CPU kernel;
  documents in a packed row are kept apart by transformers' own position-id packing detection;
- no gradient checkpointing, no torch.compile: neither changes the result; both cost CPU time;
- verl's own gradient clipping (`clip_grad`, FSDP2's global norm over the shards) at the Case's
  `max_grad_norm`, or at an unreachable norm when it asks for none; no warm-up: the AdamW step is the
  contract's AdamW step. The norm verl returns from `optimizer_step` is the reported `grad_norm`;
- no frozen parameters: verl freezes a vision tower only (`freeze_vision_tower`), so a Case that
  freezes text parameters is declined.

Under data parallelism (the harness's launcher, gloo) every rank calls `run` and rank 0 returns.
"""

from __future__ import annotations

import functools
import math

import torch.distributed as dist

from packcheck.harness.contract import Case, LayoutKind, LossKind, StepResult
from packcheck.harness.engines import Capabilities, Engine
from packcheck.impls.adapters.verl_fsdp import cpu_platform, policy, results
from packcheck.impls.adapters.verl_fsdp.batch import VerlBatch, build_batch, settings_for, slots_for
from packcheck.impls.adapters.verl_fsdp.tokenizer import tokenizer_dir

LAYOUTS = frozenset({LayoutKind.PACKED, LayoutKind.UNPACKED})
NO_CLIP = 1e30  # verl always clips; at this norm the clip coefficient is exactly 1


def ensure_process_group() -> None:
    """verl needs torch.distributed; a single-process run gets a world of one over an in-memory store."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


@functools.cache
def verl_modules():
    """Import verl's engine only after the CPU platform is current: verl reads the device name at import."""
    cpu_platform.install()
    from verl.trainer.config.config import CheckpointConfig
    from verl.workers.config import FSDPEngineConfig, FSDPOptimizerConfig, HFModelConfig
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    return CheckpointConfig, FSDPEngineConfig, FSDPOptimizerConfig, HFModelConfig, FSDPEngineWithLMHead


class VerlFSDP(Engine):
    name = "verl_fsdp"
    capabilities = Capabilities(
        families=frozenset({"llama", "qwen3"}),
        layouts=LAYOUTS,
        dtypes=frozenset({"float32"}),
        devices=frozenset({"cpu"}),
        losses=frozenset(LossKind),
        max_dp=2,
        dp_styles=frozenset({"shard"}),  # FSDP2: parameters, gradients and optimizer state sharded over dp
        reports=frozenset({"dloss_dlogprobs", "params_after", "grad_norm"}),
        attention={"auto": LAYOUTS, "sdpa": LAYOUTS},
    )

    def unsupported_reason(self, case: Case) -> str | None:
        reason = super().unsupported_reason(case)
        if reason is not None:
            return reason
        if case.layout.kind is LayoutKind.UNPACKED and case.layout.padding_side == "left":
            return "verl's padded path pads rows on the right only (torch.nested.to_padded_tensor); left padding cannot be asked for"
        if case.model.frozen:
            return f"verl cannot freeze text-model parameters ({', '.join(case.model.frozen)}): it freezes a vision tower only"
        return None

    def token_mask(self, sample) -> tuple[int, ...]:
        """The loss mask handed to verl: the harness's, unchanged (variants override this)."""
        return sample.loss_mask

    eos_token_id: int | None = None  # the tokenizer's eos (verl also makes it the pad): none, see tokenizer.py

    def tokenizer(self, case: Case) -> str:
        return tokenizer_dir(case.model.vocab_size, self.eos_token_id)

    def build_engine(self, case: Case):
        CheckpointConfig, FSDPEngineConfig, FSDPOptimizerConfig, HFModelConfig, FSDPEngineWithLMHead = verl_modules()
        model_config = HFModelConfig(
            path=case.model.checkpoint,
            tokenizer_path=self.tokenizer(case),
            use_remove_padding=True,
            enable_gradient_checkpointing=False,
            override_config={"attn_implementation": "sdpa"},
        )
        engine_config = FSDPEngineConfig(
            strategy="fsdp2",
            model_dtype="fp32",
            mixed_precision={"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"},
            use_torch_compile=False,
        )
        spec = case.optimizer
        optimizer_config = FSDPOptimizerConfig(
            lr=spec.lr if spec else 0.0,
            betas=tuple(spec.betas) if spec else (0.9, 0.999),
            weight_decay=spec.weight_decay if spec else 0.0,
            override_optimizer_config={"eps": spec.eps} if spec else None,
            clip_grad=spec.max_grad_norm if spec is not None and spec.clips else NO_CLIP,
            total_training_steps=1,
            lr_warmup_steps=0,
        )
        engine = FSDPEngineWithLMHead(model_config, engine_config, optimizer_config, CheckpointConfig())
        engine.initialize()
        return engine

    def policy_normalisers(self, case: Case) -> tuple[int, float | None]:
        """verl's (global_batch_size, loss_scale_factor) for a policy loss: the contract's G and C (policy.py)."""
        return policy.contract_normalisers(case)

    def translate(self, case: Case, rank: int):
        """(the VerlBatch, verl's TensorDict, verl's loss function) for this rank."""
        from verl.utils import tensordict_utils as tu
        from verl.workers.utils.losses import sft_loss

        if not case.loss.is_policy:
            batch = build_batch(case, rank, self.token_mask)
            data = tu.get_tensordict(tensor_dict=batch.tensors, non_tensor_dict=batch.settings)
            return batch, data, functools.partial(sft_loss, config=None)
        from verl.workers.utils.padding import left_right_2_no_padding

        slots = slots_for(case, rank)
        size = len(slots[0])
        global_batch_size, scale = self.policy_normalisers(case)
        config = policy.actor_config(case, size, scale)
        rows = [s for mb in slots for s in mb]
        settings = settings_for(case, size) | {"global_batch_size": global_batch_size, "calculate_entropy": config.calculate_entropy}
        data = tu.get_tensordict(tensor_dict=policy.rollout_tensors(case, rows, self.token_mask), non_tensor_dict=settings)
        data = left_right_2_no_padding(data)
        batch = VerlBatch(slots=slots, micro_batch_size=size, tensors={}, settings=settings)
        return batch, data, policy.ppo_loss_function(config)

    def run(self, case: Case) -> StepResult | None:
        self.require_supported(case)
        ensure_process_group()
        world = dist.get_world_size()
        if world != case.parallel.dp:
            raise RuntimeError(f"{self.name}: the process group has {world} ranks but the case asks for dp={case.parallel.dp}")
        from verl.utils import tensordict_utils as tu

        engine = self.build_engine(case)
        batch, data, loss_function = self.translate(case, dist.get_rank())
        tap = results.LogprobTap(loss_function)
        with engine.train_mode():
            engine.optimizer_zero_grad()
            output = engine.forward_backward_batch(data, tap)
            grads = results.full_gradients(engine.module)
            params_after, grad_norm = None, None
            if case.optimizer is not None:
                grad_norm = engine.optimizer_step()
                if not math.isfinite(grad_norm):
                    raise RuntimeError(f"{self.name}: verl skipped the optimizer step (grad norm {grad_norm})")
                params_after = results.full_parameters(engine.module)
        dp = case.parallel.dp
        local_loss = sum(output["loss"])
        loss = results.all_reduce_sum(local_loss) / dp  # verl scales each rank's loss by dp_size; FSDP averages
        count = int(tu.get_non_tensor_data(data, "batch_num_tokens", None))
        logprobs, dloss = results.per_sample(case, batch, output["model_output"]["log_probs"], tap.grads, dp)
        if dist.get_rank() != 0:
            return None
        return StepResult(
            logprobs=logprobs,
            loss=loss,
            num_loss_tokens=count,
            grads=grads,
            dloss_dlogprobs=dloss,
            params_after=params_after,
            grad_norm=grad_norm,
            notes={"verl": results.verl_version(), "micro_batch_size_per_gpu": batch.micro_batch_size},
        )
