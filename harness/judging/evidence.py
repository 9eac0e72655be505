"""What a failing verdict's arms show beyond its own comparisons, read for the diagnoses
(harness/judging/diagnoses.py): the evidence that tells apart bug classes sharing a symptom.

- `quantities`: over the failing pairs of results, compared in full again, which quantities failed
  and which agreed;
- `token_set_problems`: arms whose trained tokens (the non-zero `dloss_dlogprobs`) or whose
  loss-token count differ from the harness's own reading of the loss mask;
- `token_weight_problems`, `weights_verified`: arms with the right tokens and wrong weights; arms
  whose tokens and weights were read and are exact;
- `self_inconsistent`: arms whose reported loss is not the loss their own reported log-probs imply;
- `odd_one_out`: the baseline differs from every other arm while those agree with each other;
- `golden_for`: the family's golden case, result and tolerance, read as golden_regression reads them;
- `baseline_vs_golden`: the baseline's log-probs of the samples it shares with the family's stored
  float64 golden (golden_regression's case), against the golden, read as golden_regression reads
  it; None when there is no golden for the family or the arm shares no sample with it.

Everything here reads results the arms already returned: no engine runs, and nothing is claimed
that the results do not show.
"""

from __future__ import annotations

from dataclasses import dataclass

from packcheck.harness.compare import (
    GOLDEN,
    HARNESS,
    Arms,
    Comparison,
    Tolerance,
    compare_count,
    compare_loss_with_logprobs,
    compare_results,
    compare_supervised_set,
)
from packcheck.harness.compare.arm_id import ArmId
from packcheck.harness.compare.rounding_bound import between_arms, definition_at
from packcheck.harness.contract import Case, LossKind, Sample, StepResult
from packcheck.harness.golden import GoldenProblem, load_golden
from packcheck.harness.judging.golden_case import golden_case
from packcheck.harness.judging.judgement import Judgement
from packcheck.harness.judging.truth import truth_tolerance


@dataclass(frozen=True, slots=True)
class Quantities:
    """Over the failing pairs of results (arm vs arm, arm vs golden): the quantities that failed, and those
    compared in every such pair that agreed in all of them."""

    failed: frozenset[str]
    agreed: frozenset[str]


def quantities(j: Judgement, failed: list[Comparison]) -> Quantities:
    """Every quantity of each failing arm-vs-arm pair of the same samples, compared in full again (the
    diagnosis sees only the failing rows); pairs of other samples, and vs-golden pairs, count by their failing rows."""
    failing_q: set[str] = set()
    compared: list[set[str]] = []
    for pair in dict.fromkeys(c.arms for c in failed if c.arms.against != HARNESS):
        golden = golden_for(j, pair.arm) if pair.against == GOLDEN and j.ran(pair.arm) else None
        if pair.against_arm and j.has(pair.arm, pair.against) and j.case(pair.arm).samples == j.case(pair.against).samples:
            rows = compare_results(pair, j.result(pair.arm), j.result(pair.against), j.tolerance, j.locate(pair.arm),
                                   optimizer=j.case(pair.against).optimizer, definition=between_arms(j.case(pair.against), j.result(pair.against)))
        elif golden is not None and same_case(golden[0], j.case(pair.arm)):
            rows = compare_results(pair, j.result(pair.arm), golden[1], golden[2], j.locate(pair.arm), optimizer=golden[0].optimizer,
                                   definition=definition_at(golden[0], golden[1]))
        else:
            rows = [c for c in failed if c.arms == pair]
        failing_q |= {c.quantity for c in rows if not c.passed}
        compared.append({c.quantity for c in rows})
    agreed = set.intersection(*compared) - failing_q if compared else set()
    return Quantities(failed=frozenset(failing_q), agreed=frozenset(agreed))


def _harness_rows(j: Judgement, name: ArmId) -> list[Comparison]:
    """An arm against the harness's reading of the loss mask: its count, and for the token-mean SFT loss (where
    every supervised token has a non-zero weight) the tokens it trained on and their weights, read from `dloss_dlogprobs`."""
    case, result = j.case(name), j.result(name)
    rows = [compare_count(case, result, name)]
    if result.dloss_dlogprobs is not None and case.loss.kind is LossKind.SFT_TOKEN_MEAN:
        rows += compare_supervised_set(case, result, j.tolerance, j.locate(name), name)
    return rows


def token_set_problems(j: Judgement) -> list[Comparison]:
    """Every failing comparison of an arm's trained token set or loss-token count with the harness's."""
    return [c for name in j.arms for c in _harness_rows(j, name) if not c.passed and c.quantity != "dloss_dlogprobs"]


def counted_fewer(j: Judgement, arm: ArmId) -> bool:
    """Whether the engine counted fewer loss tokens on `arm` than its batch has (tokens dropped), rather than more."""
    return j.result(arm).num_loss_tokens < j.case(arm).num_loss_tokens


def trains_a_first_token(j: Judgement, arm: ArmId) -> bool:
    """Whether `arm` puts a loss weight on some sample's token 0, which no loss mask holds (nothing precedes it in its
    document): a label crossing a packed boundary trains it."""
    weights = j.result(arm).dloss_dlogprobs
    return weights is not None and any(len(w) and bool(w[0] != 0) for w in weights)


def token_weight_problems(j: Judgement) -> list[Comparison]:
    """Arms that train on exactly the harness's token set with weights other than -1/N."""
    rows = []
    for name in j.arms:
        checked = _harness_rows(j, name)
        if all(c.passed for c in checked if c.quantity != "dloss_dlogprobs"):
            rows += [c for c in checked if c.quantity == "dloss_dlogprobs" and not c.passed]
    return rows


def weights_verified(j: Judgement, name: ArmId) -> bool:
    """Whether `name`'s trained tokens and their weights were read and equal the harness's."""
    checked = _harness_rows(j, name)
    return any(c.quantity == "dloss_dlogprobs" for c in checked) and all(c.passed for c in checked)


def self_inconsistent(j: Judgement, arms: list[ArmId] | None = None) -> list[ArmId]:
    """The arms whose reported loss differs from the loss their own reported log-probs imply."""
    names = arms if arms is not None else j.arms
    return [name for name in names
            if not compare_loss_with_logprobs(j.case(name), j.result(name), j.tolerance, name).passed]


def odd_one_out(j: Judgement, baseline: str, failed: list[Comparison]) -> list[str] | None:
    """The other arms when the baseline is the odd one out: every failing arm-vs-arm comparison is against
    `baseline`, the other arms of the same samples span at least two mesh sizes, and they agree with each
    other on everything. None otherwise (with one other arm, or arms of one mesh size, a bug they share
    reads the same)."""
    if baseline not in j.results or any(c.arms.against != ArmId(baseline) for c in failed if c.arms.against_arm):
        return None
    samples = j.cases[baseline].samples
    others = [name for name in j.results if name != baseline and j.cases[name].samples == samples]
    if len({j.cases[name].parallel.world_size for name in others}) < 2:
        return None  # arms of one mesh size share whatever that mesh does wrong
    first = others[0]
    for name in others[1:]:
        rows = compare_results(Arms(name, first), j.results[name], j.results[first], j.tolerance, j.locate(name))
        if any(not c.passed for c in rows):
            return None
    return others


def _forward_key(sample: Sample) -> tuple:
    """What a sample's log-probs depend on: its tokens and its images."""
    return tuple(sample.input_ids), sample.images


def same_case(golden_case: Case, case: Case) -> bool:
    """Whether `case` is the golden's case, run at its own dtype, device and attention."""
    return golden_case.with_(name=case.name, dtype=case.dtype, device=case.device, attention=case.attention).digest() == case.digest()


def golden_for(j: Judgement, arm: ArmId | str) -> tuple[Case, StepResult, Tolerance] | None:
    """The family's golden case, its stored result and the tolerance for `arm`'s dtype, read as golden_regression
    reads them; None when there is none (no golden, a stale or damaged one, no noise floor for the dtype)."""
    family, dtype = j.setting.family, j.case(arm).dtype
    case = golden_case(j.setting)
    try:
        golden = load_golden(family, case)
        tolerance = truth_tolerance(family, dtype, j.tolerance)
    except GoldenProblem:
        return None
    return case, golden, tolerance


def baseline_vs_golden(j: Judgement, baseline: str) -> Comparison | None:
    """The baseline's log-probs of the samples it shares with the family's golden case, against the golden.

    Log-probs depend on a sample's own tokens only, so they are comparable across layouts and partitions;
    the tolerance is golden_regression's (the float64 tolerance, else the stored noise floor's). None when
    the family has no usable golden, the dtype no noise floor, or no sample is shared."""
    found = golden_for(j, baseline) if baseline in j.results else None
    if found is None:
        return None
    golden_case, golden, tolerance = found
    case = j.cases[baseline]
    in_golden = {_forward_key(s): k for k, s in enumerate(golden_case.samples)}
    pairs = [(i, in_golden[_forward_key(s)]) for i, s in enumerate(case.samples) if _forward_key(s) in in_golden]
    if not pairs:
        return None
    locate = j.locate(baseline)
    worst, where = 0.0, ""
    for i, k in pairs:
        diff = (j.results[baseline].logprobs[i].double() - golden.logprobs[k].double()).abs()
        if diff.numel() and diff.max().item() > worst:
            worst, where = diff.max().item(), locate(i, int(diff.argmax()))
    return Comparison(arms=Arms(baseline, GOLDEN), quantity="logprobs", item=f"{len(pairs)} samples shared with the golden",
                      metric="max_abs", observed=worst, **tolerance.by("logprobs"), where=where)

