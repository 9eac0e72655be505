"""hf_trainer.use-cache: the Trainer with the cache on: `TrainingArguments(use_cache=True)` from 5.0,
before that a checkpoint whose config says `use_cache=True` (transformers' default), which the 4.x
Trainer leaves as it is.

transformers detects packed sequences from `position_ids` only when there is no attention mask
*and no cache* (`masking_utils`, since 4.53.1); with the cache enabled the training forward builds a
`DynamicCache`, the detection is skipped, and a flattened row is one causal sequence: every
document attends to the ones before it in the row. Nothing warns. Before 4.53.1 there is no
detection at all (H5, the plain adapter's finding), so the variant starts at 4.53.1, where the two
differ; `nox -s "releases(transformers='4.53.1')"` runs it there (measured on 5.24.0; on 4.53.1 the
pins are what the 4.53.1 wheel's gate implies).
"""

from __future__ import annotations

from transformers import TrainingArguments

from packcheck.harness.contract import Case
from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.adapters.hf_common.releases import TRAINER_SETS_USE_CACHE
from packcheck.impls.adapters.hf_trainer.engine import VARIANT_CAPABILITIES, HfTrainerEngine, load_model


UPSTREAM = "none found (no issue about the leak; the gate came with the detection itself, transformers PR #39194)"
EVIDENCE = ("transformers 5.24.0 masking_utils.py: _preprocess_mask_arguments calls find_packed_sequence_indices only when "
            "`cache is None`; the model builds a DynamicCache when config.use_cache is True")
LEAK = "with use_cache=True the flattened row is one causal sequence: documents attend to the earlier ones in the row"


class UseCacheEngine(HfTrainerEngine):
    name = "hf_trainer.use-cache"
    engine_versions = ("transformers>=4.53.1,<6", "accelerate>=1.0")  # from the release that detects packing without a cache
    capabilities = VARIANT_CAPABILITIES
    known_findings = (
        KnownFinding(id="H2", kind=FindingKind.DEFECT, evidence=EVIDENCE, scenario="packed_vs_unpacked", upstream=UPSTREAM, summary=LEAK,
                     min_margin=2.3e3, measured="logprobs max_abs 2.34 llama (margin 2.3e4), 2.38 qwen3 (2.4e4), float32"),
        KnownFinding(id="H2", kind=FindingKind.DEFECT, evidence=EVIDENCE, scenario="document_isolation", upstream=UPSTREAM, summary=LEAK,
                     min_margin=8.0e2, measured="logprobs max_abs 0.81 llama (margin 8.1e3), 0.89 qwen3 (8.9e3), float32"),
        KnownFinding(id="H2", kind=FindingKind.DEFECT, evidence=EVIDENCE, scenario="microbatch_invariance", upstream=UPSTREAM, summary=LEAK,
                     min_margin=2.5e3, measured="logprobs max_abs 2.60 llama (margin 2.6e4), 2.55 qwen3 (2.6e4), float32"),
        KnownFinding(id="H2", kind=FindingKind.DEFECT, evidence=EVIDENCE, scenario="golden_regression", upstream=UPSTREAM, summary=LEAK,
                     min_margin=3.0e4, measured="logprobs max_abs 3.40 llama (margin 3.0e5), 3.69 qwen3 (3.9e5), float32"),
        KnownFinding(id="H2", kind=FindingKind.DEFECT, evidence=EVIDENCE, scenario="gradient_oracle", upstream=UPSTREAM, summary=LEAK,
                     min_margin=2.9e4, measured="logprobs max_abs 3.40 llama (margin 2.9e5), 3.69 qwen3 (3.2e5) against the float64 "
                                                "reference's oracle arm; grad max_rel 1.19 (1.1e5), float32, 2026-12-01"),
        # first seen at the 4.53.1 edge (nox -s "releases(transformers='4.53.1')", 2026-12-02); these scenarios came after
        # the 5.24.0 measurements above and were not run there
        KnownFinding(id="H2", kind=FindingKind.DEFECT, evidence=EVIDENCE, scenario="linear_attention_reset", upstream=UPSTREAM,
                     summary=LEAK, min_margin=1.6e2, measured="logprobs max_abs 1.08 llama (margin 1.7e3), 1.22 qwen3 (1.9e3); grad "
                                                             "max_rel 1.39, float32, transformers 4.53.1 + accelerate 1.8.1"),
        KnownFinding(id="H2", kind=FindingKind.DEFECT, evidence=EVIDENCE, scenario="optimizer_step", upstream=UPSTREAM, summary=LEAK,
                     min_margin=5.3e3, measured="params_after dp1_uneven vs dp1 cond_max_rel 0.038 llama (margin 5.3e4), 0.039 qwen3 "
                                                "(5.5e4), float32, transformers 4.53.1 + accelerate 1.8.1"),
        # the absolute check, unpinned until the drift history's releases run showed it failing (docs/history.md, 2026-12-07)
        KnownFinding(id="H2", kind=FindingKind.DEFECT, evidence=EVIDENCE, scenario="oracle_agreement", upstream=UPSTREAM, summary=LEAK,
                     min_margin=2.0e4, measured="logprobs max_abs 2.89 llama (margin 2.5e5), 2.39 qwen3 (2.0e5) against the float64 "
                                                "reference, float32, transformers 4.53.1 + accelerate 1.8.1, 2026-12-07"),
    )

    def model(self, case: Case):
        return load_model(case, use_cache=True)

    def arguments(self, case: Case, output_dir: str) -> TrainingArguments:
        # from 5.0 the Trainer overwrites the config's use_cache with this argument (default False)
        cache = {"use_cache": True} if TRAINER_SETS_USE_CACHE else {}
        return TrainingArguments(**self.base_arguments(case, output_dir), **cache)
