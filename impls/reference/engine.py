"""The reference engine: the reference trainer behind the Engine contract.

Each step of its data pipeline is a plain function bound here as an attribute, so a mutant
(`impls/mutants`) is this class with exactly one of them replaced.
"""

from __future__ import annotations

import torch

from harness.contract import Case, LayoutKind, LossKind, StepResult
from harness.engines import Capabilities, Engine
from impls.reference import aggregation, collate, loss, packing, policy_inputs, rows
from impls.reference.model import CausalLM
from impls.reference.step import train_step

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16}
ALL_LAYOUTS = frozenset(LayoutKind)


class ReferenceEngine(Engine):
    name = "reference"
    capabilities = Capabilities(
        families=frozenset({"llama", "qwen3"}),
        dtypes=frozenset(DTYPES),
        devices=frozenset({"cpu", "cuda"}),
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
    positions_and_segments = staticmethod(rows.positions_and_segments)
    target_mask = staticmethod(rows.target_mask)
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
        return None

    def run(self, case: Case) -> StepResult:
        self.require_supported(case)
        model = CausalLM.from_checkpoint(case.model.checkpoint, DTYPES[case.dtype], case.device)
        return train_step(model, case, self, self.attention_backend(case))
