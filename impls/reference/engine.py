"""The reference engine: the reference trainer behind the Engine contract.

Each step of its data pipeline is a plain function bound here as an attribute, so a mutant
(`impls/mutants`) is this class with exactly one of them replaced. On a dp x cp mesh every rank
calls `run`; rank 0 returns the result.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from harness.contract import Case, LayoutKind, LossKind, StepResult
from harness.engines import Capabilities, Engine
from impls.reference import aggregation, collate, layouts, loss, packing, policy_inputs, rows, step
from impls.reference.model import CausalLM
from impls.reference.parallel.mesh import Mesh
from impls.reference.parallel.ring import ring_backend
from impls.reference.parallel.ulysses import ulysses_backend

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16}
ALL_LAYOUTS = frozenset(LayoutKind)
CONTEXT_PARALLEL = {"ulysses": ulysses_backend, "ring": ring_backend}


class ReferenceEngine(Engine):
    name = "reference"
    capabilities = Capabilities(
        families=frozenset({"llama", "qwen3"}),
        dtypes=frozenset(DTYPES),
        devices=frozenset({"cpu", "cuda"}),
        max_dp=8,
        max_cp=8,
        cp_styles=frozenset(CONTEXT_PARALLEL),
        losses=frozenset(LossKind),
        reports=frozenset({"dloss_dlogprobs", "params_after"}),
        attention={
            "auto": ALL_LAYOUTS,
            "sdpa": ALL_LAYOUTS,
            "flex": ALL_LAYOUTS,
            "sdpa_causal": frozenset({LayoutKind.UNPACKED}),
        },
    )

    unpad_mask = staticmethod(collate.unpad_mask)
    pack_rows = staticmethod(packing.pack_rows)
    padded_width = staticmethod(layouts.padded_width)
    positions_and_segments = staticmethod(rows.positions_and_segments)
    target_mask = staticmethod(rows.target_mask)
    shard = staticmethod(step.shard)
    global_token_count = staticmethod(step.global_token_count)
    global_sequence_count = staticmethod(step.global_sequence_count)
    token_weight = staticmethod(loss.token_weight)
    policy_inputs = staticmethod(policy_inputs.policy_inputs)
    aggregation_weights = staticmethod(aggregation.aggregation_weights)

    def attention_backend(self, case: Case) -> str:
        return "sdpa" if case.attention == "auto" else case.attention

    def unsupported_reason(self, case: Case) -> str | None:
        reason = super().unsupported_reason(case)
        if reason is not None:
            return reason
        backend = self.attention_backend(case)
        if backend == "sdpa_causal" and case.layout.kind is not LayoutKind.PACKED and case.layout.padding_side == "left":
            return "attention backend 'sdpa_causal' cannot mask left padding: use 'sdpa' or right padding"
        if backend == "flex" and case.device != "cuda":
            return "attention backend 'flex' has no backward on CPU: use 'sdpa'"
        if case.device == "cuda" and not torch.cuda.is_available():
            return "device 'cuda' requested but torch sees no CUDA device"
        if case.device == "cuda" and case.parallel.world_size > torch.cuda.device_count():
            return f"{case.parallel.describe()} needs {case.parallel.world_size} GPUs (one per rank); this machine has {torch.cuda.device_count()}"
        if case.parallel.cp > 1:
            if case.attention != "auto":
                return f"under context parallelism the cp_style ({case.parallel.cp_style}) is the attention; attention must be 'auto'"
            heads = json.loads((Path(case.model.checkpoint) / "config.json").read_text())["num_attention_heads"]
            if case.parallel.cp_style == "ulysses" and heads % case.parallel.cp:
                return f"ulysses shards the {heads} attention heads over cp={case.parallel.cp} ranks: cp must divide the head count"
        return None

    def run(self, case: Case) -> StepResult | None:
        self.require_supported(case)
        device = f"cuda:{torch.cuda.current_device()}" if case.device == "cuda" else "cpu"
        return self.train(case, Mesh.build(case.parallel, device))

    def train(self, case: Case, mesh: Mesh) -> StepResult | None:
        """One step of this rank of the mesh; rank 0 returns the result."""
        device = mesh.device
        model = CausalLM.from_checkpoint(case.model.checkpoint, DTYPES[case.dtype], device)
        attention = CONTEXT_PARALLEL[case.parallel.cp_style](mesh) if case.parallel.cp > 1 else self.attention_backend(case)
        return step.train_step(model, case, self, attention, mesh)
