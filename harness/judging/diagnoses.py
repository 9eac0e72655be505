"""The diagnosis rules every scenario shares, most specific first: each reads the evidence
(harness/judging/evidence.py) and names a bug class only when the evidence singles it out;
`shared_diagnosis` returns the first that applies, or None, and the scenario's own lines follow.

Order (docs/diagnoses.md): 0. a float64 run off from float64 truth (the golden, the oracle) by float32
rounding only, everywhere (harness/judging/rounding.py: no logic bug is that small and that spread,
and the token rules would read float32-rounded weights as wrong ones); 1. the trained tokens differ
from the loss mask's; 2. the loss-token count differs from the harness's; 3. the trained tokens are right but weighted other than -1/N;
4. only the reported log-probs differ (training agrees); 5. the reported loss and the reported
log-probs disagree while the trained tokens and weights are exact; 6. only the reported loss
differs (training agrees); 7. the baseline disagrees with the stored golden; 8. the baseline is
the odd one out among arms of several mesh sizes that agree with each other.
"""

from __future__ import annotations

from typing import Callable

from packcheck.harness.compare import Comparison
from packcheck.harness.contract import LayoutKind
from packcheck.harness.judging.evidence import (
    baseline_vs_golden,
    counted_fewer,
    odd_one_out,
    quantities,
    self_inconsistent,
    token_set_problems,
    token_weight_problems,
    trains_a_first_token,
    weights_verified,
)
from packcheck.harness.compare.arm_id import ArmId
from packcheck.harness.judging.judgement import Judgement
from packcheck.harness.judging.rounding import is_float64_truth, rounding_pattern

Rule = Callable[[Judgement, list[Comparison], "str | None"], "str | None"]


def float32_inside(j: Judgement, failed: list[Comparison], baseline: str | None) -> str | None:
    if not failed or not all(is_float64_truth(c.arms.against) for c in failed):
        return None
    patterns = [rounding_pattern(j, arm, failed) for arm in sorted({c.arms.arm for c in failed})]
    if not all(p is not None and p.holds for p in patterns):
        return None
    worst = max(patterns, key=lambda p: p.worst_of_float32)
    return ("the engine computes in float32 internally: its float64 run differs from float64 truth by float32 rounding only, "
            f"spread over every tensor and document, which no logic bug looks like ({worst.arm}: {worst.figures()}). transformers, "
            "for one, computes RMSNorm, the RoPE angles and its loss in float32 even in a float64 model. Run the engine at "
            "--dtype float32, or declare its internal precision (Capabilities(dtypes=frozenset({'float32'}))), which --dtype auto, the default, then runs")


def wrong_token_set(j: Judgement, failed: list[Comparison], baseline: str | None) -> str | None:
    sets = [c for c in token_set_problems(j) if c.quantity == "supervised_set"]
    if not sets:
        return None
    arms = sorted({c.arms.arm for c in sets})
    if all(j.case(name).layout.padding_side == "left" for name in arms):
        return (f"only left-padded arms ({', '.join(map(str, arms))}) train on the wrong tokens: the loss mask is sliced from the "
                "wrong end when a padded row is unpacked (e.g. full_mask[-n:] = row_mask[:n])")
    if any(trains_a_first_token(j, c.arms.arm) for c in sets):
        return ("a document's first token is in the loss (" + sets[0].where + "): a label crosses the packed boundary "
                "(the previous document predicts it), whatever else moves with it")
    return f"the engine's loss covers a different token set than the loss mask ({sets[0].where}): mask misaligned (shifted, sliced or padded)"


def wrong_count(j: Judgement, failed: list[Comparison], baseline: str | None) -> str | None:
    counts = [c for c in token_set_problems(j) if c.quantity == "num_loss_tokens"]
    if not counts:
        return None
    arms = sorted({c.arms.arm for c in counts})
    if all(j.case(name).parallel.world_size > 1 for name in arms):
        engine, harness = j.result(arms[0]).num_loss_tokens, j.case(arms[0]).num_loss_tokens
        return (f"the loss-token count is right in one process and wrong on the distributed arms {', '.join(map(str, arms))} (engine {engine}, "
                f"harness {harness}, x{engine / harness:.3g}): the trained tokens are right but the count is "
                + ("all-reduced over more ranks than the data-parallel group (WORLD instead of DP)" if engine > harness
                   else "this rank's or shard's own, not summed over the data-parallel group"))
    if counted_fewer(j, counts[0].arms.arm):
        return f"the engine counted fewer loss tokens than the batch has on {', '.join(map(str, arms))} ({counts[0].where}): samples (a tail pack, overflow) dropped or truncated"
    packed_only = all(j.case(name).layout.kind is LayoutKind.PACKED for name in arms)  # an unpacked row has no boundary to cross
    what = "labels across document boundaries, or padding," if packed_only else "padding tokens (not only packed rows: not boundary labels)"
    return f"the engine counted more loss tokens than the batch has on {', '.join(map(str, arms))} ({counts[0].where}): {what} in the loss"


def wrong_token_weights(j: Judgement, failed: list[Comparison], baseline: str | None) -> str | None:
    weights = token_weight_problems(j)
    if not weights:
        return None
    arms = sorted({c.arms.arm for c in weights})
    single = [name for name in arms if sum(map(len, j.case(name).partition.per_rank)) == 1]
    how = ("by something other than the global count even in one micro-batch" if single
           else "per micro-batch or rank, or by a constant, instead of its share of the global token count (mean of means, constant loss scale)")
    return (f"{', '.join(map(str, arms))} train on exactly the loss mask's tokens but weight them wrongly ({weights[0].where}): the token-mean "
            f"loss is normalised {how}")


def _inconsistent_in(j: Judgement, failed: list[Comparison], quantity: str) -> list[ArmId]:
    """The arms on either side of the failing `quantity` rows whose reported loss is not what their own reported log-probs imply."""
    sides = {arm for c in failed if c.quantity == quantity for arm in (c.arms.arm, c.arms.against) if j.ran(arm)}
    return self_inconsistent(j, sorted(sides))


def reported_logprobs(j: Judgement, failed: list[Comparison], baseline: str | None) -> str | None:
    q = quantities(j, failed)
    if q.failed != {"logprobs"} or not {"loss", "grad"} <= q.agreed:
        return None
    inconsistent = _inconsistent_in(j, failed, "logprobs")
    if not inconsistent:  # log-probs that differ outside the loss only, with every loss consistent: no reporting claim
        return None
    return ("only the reported log-probs differ (between arms, or from the golden); the loss, token count, token weights and every "
            f"gradient agree, and the reported loss of {', '.join(map(str, inconsistent))} is not the mean of its own reported log-probs: "
            "the engine trains on the right log-probs and reports others, misaligned (shifted, or gathered from the wrong positions "
            "when rows are cut back into samples): a reporting bug, not the forward (not cross-document attention)")


def loss_disagrees_with_logprobs(j: Judgement, failed: list[Comparison], baseline: str | None) -> str | None:
    implied = [c for c in failed if c.quantity == "loss" and c.item == "implied by logprobs"]
    arms = sorted({c.arms.arm for c in implied})
    if not implied or len(implied) != len(failed) or not all(weights_verified(j, name) for name in arms):
        return None
    return (f"{', '.join(map(str, arms))} train on exactly the loss mask's tokens with the right weights, yet the reported loss is not the mean "
            "of the reported log-probs: one of the two is reported wrong (log-probs misaligned when rows are cut back into "
            "samples, or the loss logged with another normaliser), not the training; packed_vs_unpacked and "
            "microbatch_invariance tell which")


def reported_loss(j: Judgement, failed: list[Comparison], baseline: str | None) -> str | None:
    q = quantities(j, failed)
    if q.failed != {"loss"} or not {"logprobs", "grad"} <= q.agreed or any(c.item == "implied by logprobs" for c in failed):
        return None
    inconsistent = _inconsistent_in(j, failed, "loss")
    if not inconsistent:
        return None
    return (f"only the reported loss differs; log-probs, token count, token weights and every gradient agree, and the reported loss "
            f"of {', '.join(map(str, inconsistent))} is not the mean of its own reported log-probs: the loss the engine trains on is right and "
            "the one it reports is not (logged with another normaliser: a mean of per-micro-batch, per-rank or per-shard means), "
            "a reporting bug, not the normalisation of the training loss or a per-shard count")


def baseline_against_golden(j: Judgement, failed: list[Comparison], baseline: str | None) -> str | None:
    golden = baseline_vs_golden(j, baseline) if baseline else None
    if golden is None or golden.passed:
        return None
    return (f"the baseline {baseline!r} itself disagrees with the stored float64 golden (log-probs of {golden.item}: max_abs "
            f"{golden.observed:.3g} > {golden.threshold:.3g} at {golden.where}): the forward is wrong already without what this "
            "scenario varies (model math, or a bug every arm has): look there first")


def baseline_odd_one_out(j: Judgement, failed: list[Comparison], baseline: str | None) -> str | None:
    others = odd_one_out(j, baseline, failed) if baseline else None
    if others is None:
        return None
    sizes = sorted({j.cases[name].parallel.world_size for name in others})
    return (f"only the baseline {baseline!r} differs: the other {len(others)} arms ({', '.join(others)}) agree with each other on "
            f"everything across {len(sizes)} mesh sizes ({', '.join(map(str, sizes))} ranks): the bug is in the baseline's own path "
            "(e.g. its single-process attention or layout), not in what the other arms change")


RULES: tuple[Rule, ...] = (float32_inside,
                           wrong_token_set, wrong_count, wrong_token_weights, reported_logprobs, loss_disagrees_with_logprobs, reported_loss,
                           baseline_against_golden, baseline_odd_one_out)


class Diagnosis(str):
    """A diagnosis line that knows the shared rule that wrote it: the bug class as data, which a shrunk case must still
    be diagnosed with (harness/shrink). A line reworded or written by a scenario itself is a plain str (no rule)."""

    rule: str

    def __new__(cls, text: str, rule: str) -> Diagnosis:
        line = super().__new__(cls, text)
        line.rule = rule
        return line


def diagnosis_rule(line: str) -> str | None:
    """The shared rule that wrote `line`, or None: a scenario's own line (or none)."""
    return line.rule if isinstance(line, Diagnosis) else None


def shared_diagnosis(j: Judgement, failed: list[Comparison], baseline: str | None = None) -> Diagnosis | None:
    """The first shared rule the evidence satisfies; `baseline` is the arm the others are judged against
    (None where the scenario has no such arm)."""
    for rule in RULES:
        line = rule(j, failed, baseline)
        if line is not None:
            return Diagnosis(line, rule.__name__)
    return None
