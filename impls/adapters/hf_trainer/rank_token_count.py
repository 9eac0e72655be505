"""hf_trainer.rank-token-count: the Trainer with `TrainingArguments(average_tokens_across_devices=False)`.

With it off, `num_items_in_batch` is each rank's own count of loss tokens (no gather) and the loss is
not multiplied by the number of processes, so rank r's loss is its own token mean L_r = S_r / N_r and
DDP averages the gradients: the step trains on (1/dp) sum_r S_r / N_r, a mean of the ranks' means,
instead of sum_r S_r / N. Exact whenever every rank holds as many loss tokens, wrong as soon as they
differ (the dp arms hold 2:1 token counts). The option is documented (default True in 5.x: it was added
for transformers#34242); nothing warns when it is off under DDP. The engine's count is rank 0's own.
Single-process arms cannot see it: they pass.
"""

from __future__ import annotations

from transformers import TrainingArguments

from packcheck.harness.contract import Case
from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.adapters.hf_trainer.engine import VARIANT_RELEASES, HfTrainerEngine

UPSTREAM = "transformers#34242 (the option average_tokens_across_devices; documented, by design when off)"
EVIDENCE = ("transformers 5.24.0 trainer.py: Trainer.compute_loss and _get_num_items_in_batch gather the token count over "
            "the processes only when args.average_tokens_across_devices is True")
SUMMARY = ("average_tokens_across_devices=False: each DP rank divides by its own token count and DDP averages, "
           "a mean of the ranks' token means instead of the global token mean")


class RankTokenCountEngine(HfTrainerEngine):
    name = "hf_trainer.rank-token-count"
    engine_versions = VARIANT_RELEASES
    # measured with `packcheck run --engine hf_trainer.rank-token-count --family llama --scenario microbatch_invariance
    # token_conservation dp_cp_reduction optimizer_step --dtype float32` (docs/findings.md); each verdict's worst margin is the count's
    # (inf), min_margin a tenth of the worst margin of what the count causes
    known_findings = (
        KnownFinding(id="H7", kind=FindingKind.DESIGN_CHOICE, evidence=EVIDENCE,
                     scenario="microbatch_invariance", upstream=UPSTREAM, summary=SUMMARY, min_margin=1.0e4,
                     measured="dp2_uneven: count 85 (rank 0's) for 113, dloss_dlogprobs max_rel 1.02 (margin 1.0e5), "
                              "grad max_rel 0.87 (8.7e3); single-process arms pass; llama float32"),
        KnownFinding(id="H7", kind=FindingKind.DESIGN_CHOICE, evidence=EVIDENCE,
                     scenario="token_conservation", upstream=UPSTREAM, summary=SUMMARY, min_margin=23.0,
                     measured="packed_dp2: count 59 for 107, loss rel 2.4e-3 from the mean of means (margin 236); llama float32"),
        KnownFinding(id="H7", kind=FindingKind.DESIGN_CHOICE, evidence=EVIDENCE,
                     scenario="dp_cp_reduction", upstream=UPSTREAM, summary=SUMMARY, min_margin=2.5e4,
                     measured="dp2_cp1_uneven: count 97 for 113, dloss_dlogprobs max_rel 2.53 (margin 2.5e5); "
                              "dp2_cp1_rank_without_tokens: loss and weights rel 0.5; llama float32"),
        KnownFinding(id="H7", kind=FindingKind.DESIGN_CHOICE, evidence=EVIDENCE,
                     scenario="optimizer_step", upstream=UPSTREAM, summary=SUMMARY, min_margin=1.9e3,
                     measured="dp2_replicate: count 97 for 113, dloss_dlogprobs max_rel 2.53 (margin 2.5e5), grad_norm rel "
                              "0.465 (4.7e4), grad max_rel 1.94 (1.9e4); llama float32"),
    )

    def arguments(self, case: Case, output_dir: str) -> TrainingArguments:
        return TrainingArguments(**self.base_arguments(case, output_dir), average_tokens_across_devices=False)
