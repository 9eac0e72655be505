"""hf_trainer.qwen3_5: the plain Trainer on the hybrid Qwen3.5 family (GatedDeltaNet + attention).

Nothing is configured differently from `hf_trainer`: packed cases go through
`DataCollatorWithFlattening` (one row per micro-batch, documents told apart by `position_ids`
resets). transformers turns those resets into a document-causal mask for the full-attention
layers, but `Qwen3_5GatedDeltaNet` receives no `cu_seqlens` on this path (its torch fallback has
none), so the short conv and the recurrent state of one document run on into the next one in the
row. A variant of its own (not a family of the main adapter) so the default CI stays within its
time, and `nox -s "findings(adapter='hf_trainer')"` reproduces it.
"""

from __future__ import annotations

from dataclasses import replace

from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.adapters.hf_trainer.engine import VARIANT_CAPABILITIES, VARIANT_RELEASES, HfTrainerEngine

UPSTREAM = "none found"
EVIDENCE = ("transformers 5.24.0 models/qwen3_5/modeling_qwen3_5.py: Qwen3_5GatedDeltaNet.forward runs causal_conv1d_fn and "
            "torch_chunk_gated_delta_rule over the whole flattened row; cu_seqlens reach them only as flash-attention kwargs, "
            "which this path never builds")
LEAK = "position-id packing isolates attention but not GatedDeltaNet: conv and recurrent state carry across packed documents"


class HybridPackingEngine(HfTrainerEngine):
    name = "hf_trainer.qwen3_5"
    engine_versions = VARIANT_RELEASES
    capabilities = replace(VARIANT_CAPABILITIES, families=frozenset({"qwen3_5"}))
    known_findings = tuple(
        KnownFinding(id="H8", kind=FindingKind.DEFECT, evidence=EVIDENCE,
                     scenario=scenario, upstream=UPSTREAM, summary=LEAK, min_margin=min_margin,
                     measured=f"{measured}, qwen3_5 float32, 2026-12-01")
        for scenario, min_margin, measured in (
            ("packed_vs_unpacked", 8.4e3, "grad rel_l2 8.40 at model.layers.0.linear_attn.dt_bias (margin 8.4e4)"),
            ("document_isolation", 8.8e3, "logprobs max_abs 8.87 (margin 8.9e4)"),
            ("microbatch_invariance", 6.6e3, "logprobs max_abs 6.69 (margin 6.7e4)"),
            ("golden_regression", 1.7e3, "loss rel 3.0e-2 (margin 1.8e4)"),
            ("linear_attention_reset", 4.9e3, "logprobs max_abs 4.94 (margin 4.9e4)"),
            ("gradient_oracle", 1.9e2, "logprobs max_abs 5.98 (margin 1.9e3 at the float32 noise floor x 10), grad rel_l2 5.49 at "
                                       "model.layers.2.linear_attn.dt_bias (1.4e3) against the float64 reference's oracle arm"),
        )
    )
