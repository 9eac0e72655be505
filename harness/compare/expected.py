"""Compare a StepResult with what the harness knows without any engine: counts, the supervised
set, and the loss implied by the engine's own log-probs.

These are the strongest checks there are: they hold exactly, in any dtype, and need no second run.
"""

from __future__ import annotations

from packcheck.harness.compare.arm_id import ArmId
from packcheck.harness.compare.arms import Locate
from packcheck.harness.compare.comparison import HARNESS, Arms, Comparison
from packcheck.harness.compare.metrics import rel_nats
from packcheck.harness.compare.rounding_bound import at_least, definition_at
from packcheck.harness.compare.tolerances import Tolerance
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.losses import expected_loss


def compare_count(case: Case, result: StepResult, arm: ArmId | str) -> Comparison:
    expected = case.num_loss_tokens
    got = result.num_loss_tokens
    direction = "fewer: tokens dropped or truncated" if got < expected else "more: padding or extra boundary targets counted"
    return Comparison(
        arms=Arms(arm, HARNESS), quantity="num_loss_tokens", item="", metric="abs", observed=float(abs(got - expected)),
        threshold=0.0, where=f"engine counted {got}, harness counts {expected}" + ("" if got == expected else f" ({direction})"),
    )


def compare_loss_with_logprobs(case: Case, result: StepResult, tol: Tolerance, arm: ArmId | str) -> Comparison:
    """The reported loss must equal -sum(logprobs over the harness's supervised set) / |S|."""
    expected = expected_loss(case, result.logprobs)
    implied, definition = expected.loss, definition_at(case, result, expected)
    derived = None if definition is None else definition.loss_term([result.loss], implied)
    return Comparison(
        arms=Arms(arm, HARNESS), quantity="loss", item="implied by logprobs", metric="rel_nats", observed=rel_nats(result.loss, implied),
        **at_least(tol.by("loss"), derived), where=f"reported {result.loss:.12g}, -mean(logprobs over the loss mask) = {implied:.12g}",
    )


def compare_supervised_set(case: Case, result: StepResult, tol: Tolerance, locate: Locate, arm: ArmId | str) -> list[Comparison]:
    """The tokens the engine backpropagated through must be exactly the loss mask, each weighted -1/|S|."""
    weights = result.dloss_dlogprobs
    assert weights is not None, "caller checks that the engine reports dloss_dlogprobs"
    engine_set = {(i, t) for i, w in enumerate(weights) for t in w.nonzero().flatten().tolist()}
    expected = case.supervised
    extra = sorted(engine_set - expected)
    missing = sorted(expected - engine_set)
    examples = [f"in loss but masked: {locate(*p)}" for p in extra[:2]] + [f"masked out but supervised: {locate(*p)}" for p in missing[:2]]
    rows = [Comparison(
        arms=Arms(arm, HARNESS), quantity="supervised_set", item="", metric="mismatched", observed=float(len(extra) + len(missing)),
        threshold=0.0, where="; ".join(examples) if examples else f"{len(expected)} tokens, identical",
    )]
    targets = expected_loss(case, result.logprobs).dloss_dlogprobs  # -1/N on the loss mask
    worst, where = 0.0, ""
    for i, t in sorted(expected & engine_set):
        target = float(targets[i][t])
        error = abs(float(weights[i][t]) - target) / abs(target)
        if error > worst:
            worst, where = error, f"{locate(i, t)}: weight {float(weights[i][t]):.6g}, expected -1/{case.num_loss_tokens}"
    rows.append(Comparison(arms=Arms(arm, HARNESS), quantity="dloss_dlogprobs", item="token weight", metric="max_rel",
                           observed=worst, **tol.by("dloss_dlogprobs"), where=where))
    return rows
