"""What the plain Trainer gets wrong under older transformers releases, pinned per release range
(`KnownFinding.engine_versions`: the engine's description keeps a finding only where the installed
release falls in its range). Measured under transformers 4.45.2 + accelerate 1.2.1, the environment
`nox -s "releases(transformers='4.45.2')"` builds
(docs/findings.md, "hf_trainer across transformers releases").

- Before 4.53.1 a flattened row's `position_ids` split it into documents only on the flash-attention
  path (`_flash_attention_forward`); sdpa and eager build one causal mask over the whole row, so
  with `DataCollatorWithFlattening` every packed document attends to the ones before it. transformers
  PR #39194 (merged 2025-07-03, first released in 4.53.1) added `masking_utils.find_packed_sequence_indices`,
  called from `_preprocess_mask_arguments`, which turns the resets into a document mask for every
  backend, but only when there is no cache: with `use_cache=True` the row still leaks (H2,
  `hf_trainer.use-cache`). Read in the 4.53.0 (absent) and 4.53.1 (present) wheels.
- Before 4.46 the Trainer has no `num_items_in_batch`: each micro-batch's loss is its own token mean
  and accelerate divides it by the accumulation steps, a mean of micro-batch means on uneven
  micro-batches (the path `hf_trainer.legacy-ga` still reaches on 5.x). 4.46.0 has the count but was
  yanked from PyPI; 4.46.1 is the first installable release with it.

Each range is run at both edges by `nox -s releases` (noxfile.py's RELEASES): 4.45.2 flagged by both,
4.46.1 by H5 alone, 4.53.0 by H5, 4.53.1 passing. Where H6 is gone and H5 is not (4.46-4.53.0), the cells
the two failed together are H5's alone; their sizes there are expected from the same one causal row
(H2 on 5.24.0 and 4.53.1, H5's log-probs on 4.45.2), not measured.
"""

from __future__ import annotations

from packcheck.harness.engines import FindingKind, KnownFinding

FLAT = ("with sdpa attention a row of DataCollatorWithFlattening is one causal sequence: position_ids resets split documents "
        "only for flash_attention_2, so every packed document attends to the ones before it in the row")
FLAT_UPSTREAM = ("fixed by transformers PR #39194 (merged 2025-07-03; in 4.53.1, not in 4.53.0, as transformers issue #41856 "
                 "places it); 4.45's collator only warns 'Make sure your attention computation is able to handle it!'")
MEANS = "no num_items_in_batch: each micro-batch's loss is its own token mean divided by the accumulation steps (mean of means)"
MEANS_UPSTREAM = ("fixed by transformers PR #34191 in 4.46.0, a release yanked from PyPI (4.46.1 is the first installable fix); "
                  "transformers#37766 tracks the legacy path that remains")
FLAT_EVIDENCE = ("transformers 4.53.0 masking_utils.py: _preprocess_mask_arguments returns no packed-sequence mask "
                 "(find_packed_sequence_indices does not exist); in 4.53.1 it calls find_packed_sequence_indices(position_ids) "
                 "when attention_mask and past_key_values are None")
MEANS_EVIDENCE = ("transformers 4.46.0 trainer.py: Trainer.get_batch_samples returns num_items_in_batch and training_step hands it "
                  "to compute_loss; 4.45.2's trainer.py has neither, so the model's ForCausalLMLoss takes each micro-batch's mean")
BEFORE_PACKED_MASKS = ("transformers<4.53.1",)
BEFORE_ITEM_COUNT = ("transformers<4.46",)
COUNTS_BUT_NO_PACKED_MASKS = ("transformers>=4.46,<4.53.1",)
MEASURED = "llama float32, transformers 4.45.2 + accelerate 1.2.1, 2026-12-01"
# each bound of the ranges above -> (the last release on its inside, the first on its outside), from PyPI's release list
# (4.46.0 was yanked, so 4.46.1 is the first installable release past 4.46); `nox -s releases` runs both
EDGES = {"<4.46": ("4.45.2", "4.46.1"), ">=4.46": ("4.46.1", "4.45.2"), "<4.53.1": ("4.53.0", "4.53.1")}


def flat(scenario: str, min_margin: float, measured: str, releases: tuple[str, ...] = BEFORE_PACKED_MASKS,
         when: str = MEASURED) -> KnownFinding:
    return KnownFinding(id="H5", kind=FindingKind.DEFECT, scenario=scenario, summary=FLAT, evidence=FLAT_EVIDENCE,
                        upstream=FLAT_UPSTREAM, min_margin=min_margin, measured=f"{measured}, {when}", engine_versions=releases)


def flat_alone(scenario: str, min_margin: float, measured: str) -> KnownFinding:
    """H5 where H6 no longer holds (4.46-4.53.0), in a cell the two fail together before 4.46."""
    return flat(scenario, min_margin, measured, COUNTS_BUT_NO_PACKED_MASKS,
                "expected from the same one causal row (H2 on 5.24.0 and 4.53.1, H5 on 4.45.2), not yet measured on 4.46.1-4.53.0")


def means(scenario: str, min_margin: float, measured: str) -> KnownFinding:
    return KnownFinding(id="H6", kind=FindingKind.DEFECT, scenario=scenario, summary=MEANS, evidence=MEANS_EVIDENCE,
                        upstream=MEANS_UPSTREAM, min_margin=min_margin, measured=f"{measured}, {MEASURED}",
                        engine_versions=BEFORE_ITEM_COUNT)


def both(scenario: str, min_margin: float, measured: str) -> KnownFinding:
    return KnownFinding(id="H6+H5", kind=FindingKind.DEFECT, scenario=scenario, summary=f"{MEANS}; and {FLAT}",
                        evidence=f"{MEANS_EVIDENCE}; {FLAT_EVIDENCE}", upstream=f"{MEANS_UPSTREAM}; {FLAT_UPSTREAM}",
                        min_margin=min_margin, measured=f"{measured}, {MEASURED}", engine_versions=BEFORE_ITEM_COUNT)


RELEASE_FINDINGS = (
    flat("packed_vs_unpacked", 2.3e3, "logprobs max_abs 2.34 (margin 2.3e4)"),
    flat("document_isolation", 8.0e2, "logprobs max_abs 0.81 (margin 8.1e3)"),
    flat("linear_attention_reset", 1.3e3, "grad max_rel 1.39 at model.layers.0.self_attn.o_proj.weight (margin 1.4e4)"),
    flat("gradient_oracle", 2.9e4, "logprobs max_abs 3.40 against the float64 reference's oracle arm (margin 2.9e5)"),
    both("microbatch_invariance", 5.3e3, "dloss_dlogprobs max_rel 13.1 (margin 5.4e4 at the calibrated float32 tolerance)"),
    flat_alone("microbatch_invariance", 2.5e3, "logprobs max_abs 2.60 (margin 2.6e4) as H2 on 5.24.0"),
    means("token_conservation", 5.4, "loss rel 5.5e-4 against -mean(logprobs over the loss mask) (margin 54.5)"),
    both("golden_regression", 6.4e4, "dloss_dlogprobs max_rel 0.192 (margin 6.5e5), logprobs max_abs 3.40 (2.9e5)"),
    flat_alone("golden_regression", 2.9e4, "logprobs max_abs 3.40 (margin 2.9e5) as H5 on 4.45.2 and H2 on 5.24.0"),
    both("optimizer_step", 8.2e3, "params_after dp1_uneven vs dp1 cond_rel_l2 0.0588 (margin 8.3e4 at the calibrated float32 tolerance), "
                           "dloss_dlogprobs max_rel 11.6, grad_norm rel 1.32"),
    flat_alone("optimizer_step", 5.3e3, "params_after dp1_uneven vs dp1 cond_max_rel 0.038 (margin 5.3e4) as H2 on 4.53.1"),
    # the absolute check, unpinned until the drift history's releases run showed it failing at these releases
    # (nox -s releases into one store, 2026-12-07, docs/history.md)
    both("oracle_agreement", 8.0e4, "dloss_dlogprobs max_rel 0.406 (margin 8.1e5) against the float64 reference, llama"),
    flat("oracle_agreement", 2.0e4, "logprobs max_abs 2.55-3.40 (margin 2.2e5-2.9e5) against the float64 reference, llama and qwen3",
         COUNTS_BUT_NO_PACKED_MASKS, "transformers 4.46.1 and 4.53.0, 2026-12-07"),
)
