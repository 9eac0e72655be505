"""The reference engine: the reference trainer behind the Engine contract.

Its data pipeline is one typed value (impls/reference/step/pipeline.py), so a mutant (`impls/mutants`)
is this class with a pipeline that differs in exactly one step. On a dp x cp mesh every rank
calls `run` and returns its own result: rank 0's is the arm's, the others' parameters are compared with it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import ClassVar

import torch

from packcheck.harness.contract import AdvantageEstimator, Case, LayoutKind, LossKind, StepResult
from packcheck.harness.engines import Capabilities, Engine, device_missing
from packcheck.harness.engines.capture import active_recorder
from packcheck.impls.reference.data.predictions import label_logprobs
from packcheck.impls.reference.model import HybridCausalLM
from packcheck.impls.reference.model.attention import AttentionBackend
from packcheck.impls.reference.model.config import attention_head_dim
from packcheck.impls.reference.model.flash_attention import flash_backend, known_wrong
from packcheck.impls.reference.model.linear_attention import LinearAttentionBackend, default_linear_attention
from packcheck.impls.reference.model.loading import load_model
from packcheck.impls.reference.model.varlen_attention import varlen_backend
from packcheck.impls.reference.parallel.expert_parallel import expert_parallel_missing, require_equal_forwards, shard_experts
from packcheck.impls.reference.parallel.fully_sharded import missing_fsdp2_feature, shard_model
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.parallel.ring import ring_backend
from packcheck.impls.reference.parallel.sharded_tower import shard_tower
from packcheck.impls.reference.parallel.tensor_parallel import split_for_tensor_parallel, tensor_parallel_unsupported
from packcheck.impls.reference.parallel.ulysses import ulysses_backend
from packcheck.impls.reference.step.pipeline import REFERENCE, Pipeline
from packcheck.impls.reference.step.memory_plan import NONE, MemoryPlan, device_bytes, memory_plan, plannable
from packcheck.impls.reference.step.train_step import build_micro_batches, train_step

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16}
ALL_LAYOUTS = frozenset(LayoutKind)
CONTEXT_PARALLEL = {"ulysses": ulysses_backend, "ring": ring_backend}
# attention through a CUDA flash kernel (bfloat16 only here): resolved when a case asks for it, where an import
# that fails becomes the case's unsupported reason
KERNEL_ATTENTION = {"flash": flash_backend, "varlen": varlen_backend}


def kernel_attention_missing(case: Case) -> str | None:
    """Why the reference cannot run `case`'s kernel attention (KERNEL_ATTENTION) here, or None."""
    if case.device != "cuda":
        return f"attention backend {case.attention!r} is a CUDA kernel: use --device cuda, or 'sdpa' on the CPU"
    if case.dtype != "bfloat16":
        return f"attention backend {case.attention!r} runs in bfloat16 only (flash kernels): use --dtype bfloat16, or 'sdpa'"
    try:
        KERNEL_ATTENTION[case.attention]()
    except ImportError as missing:
        return f"attention backend {case.attention!r} is not installed here: {missing}"
    if case.attention == "flash":  # a release known to compute wrong gradients at this head size on this GPU is refused
        config = json.loads((Path(case.model.checkpoint) / "config.json").read_text())
        return known_wrong(attention_head_dim(config), torch.cuda.get_device_capability())
    return None


def pipeline_unsupported(case: Case) -> str | None:
    """Why the reference cannot run `case`'s pipeline-parallel plan (step/pipeline_schedule.py), or None."""
    plan = case.parallel
    if plan.cp > 1 or plan.tp > 1 or plan.ep > 1:
        return (f"{plan.describe()}: the reference's pipeline parallelism runs with dp only (parallel.pp={plan.pp} with cp, tp or ep "
                "above 1 is not composed); set cp=tp=ep=1, or compose them in impls/reference/step/pipeline_schedule.py")
    if plan.dp_style == "shard":
        return ("pipeline parallel with dp_style='shard' (FSDP2) is not implemented in the reference: "
                "use dp_style 'replicate' (DDP per stage)")
    config = json.loads((Path(case.model.checkpoint) / "config.json").read_text())
    units = config.get("text_config", config)["num_hidden_layers"] + 2  # embedding, each decoder layer, head
    if plan.pp > units:
        return (f"parallel.pp={plan.pp} stages need a unit each; this model has {units} (embedding, "
                f"{units - 2} decoder layers, final norm with lm_head): lower pp to at most {units}")
    return None


class ReferenceEngine(Engine):
    name = "reference"
    capabilities = Capabilities(
        families=frozenset({"llama", "qwen3", "qwen3_5", "qwen3_moe", "qwen2_5_vl"}),
        dtypes=frozenset(DTYPES),
        devices=frozenset({"cpu", "cuda"}),
        max_dp=8,
        max_cp=8,
        max_tp=4,
        max_pp=8,
        max_ep=4,
        cp_styles=frozenset(CONTEXT_PARALLEL),
        dp_styles=frozenset({"replicate", "shard"}),
        losses=frozenset(LossKind),
        advantage_estimators=frozenset(AdvantageEstimator),
        reports=frozenset({"dloss_dlogprobs", "params_after", "aux_loss", "router_tokens_per_expert", "advantages"}),
        images=True,
        activations=True,
        token_budget=True,
        pad_poison=True,
        attention={
            "auto": ALL_LAYOUTS,
            "sdpa": ALL_LAYOUTS,
            "flex": ALL_LAYOUTS,
            "flash": ALL_LAYOUTS,
            "varlen": ALL_LAYOUTS,
            "sdpa_causal": frozenset({LayoutKind.UNPACKED}),
        },
    )

    pipeline: ClassVar[Pipeline] = REFERENCE

    def attention_backend(self, case: Case) -> str | AttentionBackend:
        if case.attention in KERNEL_ATTENTION:
            return KERNEL_ATTENTION[case.attention]()
        return "sdpa" if case.attention == "auto" else case.attention

    def linear_attention_backend(self, case: Case) -> str | LinearAttentionBackend:
        """The GatedDeltaNet backend of hybrid families (model/linear_attention.py); dense families ignore it."""
        return default_linear_attention(case.device, DTYPES[case.dtype])

    def prepare_model(self, model: torch.nn.Module, case: Case) -> None:
        """A variant's change to the freshly loaded model (reference.fast: chunked log-probs, compiled layers); here none."""

    def unsupported_reason(self, case: Case) -> str | None:
        reason = super().unsupported_reason(case)
        if reason is not None:
            return reason
        if case.attention in KERNEL_ATTENTION and (reason := kernel_attention_missing(case)) is not None:
            return reason
        backend = self.attention_backend(case)
        if backend == "sdpa_causal" and case.layout.kind is not LayoutKind.PACKED and case.layout.padding_side == "left":
            return "attention backend 'sdpa_causal' cannot mask left padding: use 'sdpa' or right padding"
        if backend == "flex" and case.device != "cuda":
            return "attention backend 'flex' has no backward on CPU: use 'sdpa'"
        if missing := device_missing(case.device):
            return f"device 'cuda' requested but {missing}"
        if case.device == "cuda" and case.parallel.world_size > torch.cuda.device_count():
            return f"{case.parallel.describe()} needs {case.parallel.world_size} GPUs (one per rank); this machine has {torch.cuda.device_count()}"
        if case.parallel.dp_style == "shard" and (missing := missing_fsdp2_feature()) is not None:
            return missing
        if case.parallel.ep > 1 and (reason := expert_parallel_missing(case)) is not None:
            return reason
        if case.model.vision is not None and not case.model.is_frozen("model.visual."):
            return "the reference trains vision-language models with a frozen vision tower only: ModelSpec.frozen must cover 'model.visual.'"
        if case.parallel.pp > 1 and (reason := pipeline_unsupported(case)) is not None:
            return reason
        if case.parallel.tp > 1 and (reason := tensor_parallel_unsupported(case, self.pipeline.label_logprobs is label_logprobs)):
            return reason
        if case.parallel.cp > 1:
            if case.attention != "auto":
                return f"under context parallelism the cp_style ({case.parallel.cp_style}) is the attention; attention must be 'auto'"
            config = json.loads((Path(case.model.checkpoint) / "config.json").read_text())
            heads = config.get("text_config", config)["num_attention_heads"]  # a VLM's decoder config is nested
            if case.parallel.cp_style == "ulysses" and heads % case.parallel.cp:
                return f"ulysses shards the {heads} attention heads over cp={case.parallel.cp} ranks: cp must divide the head count"
        return None

    def run(self, case: Case) -> StepResult | None:
        self.require_supported(case)
        device = f"cuda:{torch.cuda.current_device()}" if case.device == "cuda" else "cpu"
        return self.train(case, Mesh.build(case.parallel, device))

    def train(self, case: Case, mesh: Mesh) -> StepResult | None:
        """One step of this rank of the mesh, and this rank's result."""
        device = mesh.device
        started = time.perf_counter()
        if torch.device(device).type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        model = load_model(case.model.checkpoint, DTYPES[case.dtype], device)
        loaded = time.perf_counter()
        self.prepare_model(model, case)
        if mesh.tp > 1:  # this rank's slices replace the split parameters (names unchanged) before anything else sees them
            split_for_tensor_parallel(model, mesh)
        if isinstance(model, HybridCausalLM):
            model.linear_attention = self.linear_attention_backend(case)
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(not case.model.is_frozen(name))
        recorder = active_recorder()  # a localisation's capture (harness/engines/capture.py); None on every ordinary run
        if recorder is not None:
            recorder.attach(model)
        if mesh.dp > 1 and hasattr(model, "encode_images"):  # ranks with other micro-batches: the tower's collectives must match
            shard_tower(model.model.visual, mesh)
        if case.parallel.dp_style == "shard" and mesh.dp > 1:  # FSDP2; "replicate" and None: DDP
            shard_model(model, mesh)
        attention = CONTEXT_PARALLEL[case.parallel.cp_style](mesh) if case.parallel.cp > 1 else self.attention_backend(case)
        if case.parallel.ep > 1:  # the sparse layers' experts spread over the EP group, DDP kept off them
            shard_experts(model, mesh, self.pipeline.expert_slot_weights)
        micro_batches = build_micro_batches(case, self.pipeline, mesh)
        require_equal_forwards(sum(len(forwards) for forwards in micro_batches), mesh)
        # a localisation's capture records each module's output as it runs: a layer recomputed in backward would record twice
        plan = NONE if recorder is not None else self.memory_plan(model, case, mesh, micro_batches)
        result = train_step(model, case, plan.apply(model, self.pipeline), attention, mesh, recorder, micro_batches)
        if plan.saving and torch.device(device).type == "cuda":  # a large step says what it cost (the launch's log)
            torch.cuda.synchronize(device)
            print(f"reference: {case.name}: {time.perf_counter() - started:.1f} s ({loaded - started:.1f} s loading the checkpoint), "
                  f"peak GPU memory {torch.cuda.max_memory_allocated(device) / 1e9:.1f} GB", file=sys.stderr, flush=True)
        return result

    @staticmethod
    def memory_plan(model: torch.nn.Module, case: Case, mesh: Mesh, micro_batches) -> MemoryPlan:
        """Whether this rank's step fits its device as it is (step/memory_plan.py); a step that does not is said on stderr."""
        if not plannable(model):
            return NONE
        shapes = [tuple(p.input_ids_BT.shape) for forwards in micro_batches for p in forwards]
        plan = memory_plan(model.config, DTYPES[case.dtype].itemsize, device_bytes(mesh.device), shapes)
        if plan.saving:
            print(f"reference: {case.name}: {plan.describe()}", file=sys.stderr, flush=True)
        return plan
