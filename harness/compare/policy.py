"""Compare a policy-loss StepResult with the loss's definition, evaluated by the harness.

The definition (harness/losses) is evaluated at the engine's own log-probs, so these checks need no
second engine and hold in any dtype:
- the reported loss equals the definition (not for entropy arms: the harness cannot evaluate H);
- `dloss_dlogprobs` equals the definition's weight of every token, 0 off the loss mask;
- without KL, the tokens whose weight the clip zeroes are exactly the definition's;
- at step 0, exp(logp - old) is 1 for every token;
- the entropy bonus is present, with its sign, and no larger than log(V) times the total weight.

In float32 and bfloat16 the engine computed its loss and weights from log-probs it then rounded to report them, so
each threshold is at least what that rounding moves the quantity by (harness/compare/rounding_bound.py).
"""

from __future__ import annotations

import math

import torch

from packcheck.harness.compare.arm_id import ArmId
from packcheck.harness.compare.arms import Locate
from packcheck.harness.compare.comparison import HARNESS, Arms, Comparison
from packcheck.harness.compare.metrics import rel_nats
from packcheck.harness.compare.rounding_bound import Definition, at_least, definition_at, ratio_term, rounding_of
from packcheck.harness.compare.tolerances import TOLERANCES, Tolerance
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.losses import Branch, Expected, expected_loss, policy_samples, token_weights


def describe_branch(case: Case, expected: Expected, sample: int, token: int) -> str:
    tl = expected.token_losses[sample]
    advantage = policy_samples(case)[sample].token_advantages[token]
    return f"{Branch(int(tl.branch_T[token])).name.lower()}, r={float(tl.ratio_T[token]):.6g}, A={advantage:+.3g}"


def compare_policy_loss(result: StepResult, expected: Expected, tol: Tolerance, arm: ArmId | str,
                        definition: Definition | None = None) -> Comparison:
    derived = None if definition is None else definition.loss_term([result.loss], expected.loss)
    return Comparison(
        arms=Arms(arm, HARNESS), quantity="loss", item="policy loss definition", metric="rel_nats", observed=rel_nats(result.loss, expected.loss),
        **at_least(tol.by("loss"), derived), where=f"reported {result.loss:.12g}, the definition at the engine's log-probs gives {expected.loss:.12g}",
    )


def compare_policy_weights(case: Case, result: StepResult, expected: Expected, tol: Tolerance, locate: Locate, arm: ArmId | str,
                           definition: Definition | None = None) -> Comparison:
    scale = max(float(t.abs().max()) for t in expected.dloss_dlogprobs if t.numel())
    worst, where = 0.0, ""
    for i, (got, want) in enumerate(zip(result.dloss_dlogprobs, expected.dloss_dlogprobs)):
        diff = (got.double() - want).abs()
        if diff.numel() and float(diff.max()) > worst:
            t = int(diff.argmax())
            worst = float(diff.max())
            where = (f"{locate(i, t)} ({describe_branch(case, expected, i, t)}): weight {float(got[t]):.6g}, "
                     f"the definition gives {float(want[t]):.6g}")
    observed = worst / scale if scale else (0.0 if worst == 0 else math.inf)
    derived = None if definition is None else definition.weights_term([result.dloss_dlogprobs], scale)
    return Comparison(arms=Arms(arm, HARNESS), quantity="dloss_dlogprobs", item="policy token weight", metric="max_rel",
                      observed=observed, **at_least(tol.by("dloss_dlogprobs"), derived), where=where)


def compare_clipped_set(case: Case, result: StepResult, expected: Expected, locate: Locate, arm: ArmId | str) -> Comparison:
    """Without a KL penalty, the loss tokens with weight zero (clipped) must be exactly the definition's: the clip
    bounds, the min/max branch and the ratio's old log-probs all show here, token by token. A clipped token's weight
    is exactly 0 in any dtype (the clip branch is a constant), so "zero" means zero to float64 precision. A token whose
    advantage is 0 (a group of one under an estimator) weighs 0 on every branch: whether it clipped cannot show, so it
    is left out (its weight is still compared)."""
    scale = max(float(t.abs().max()) for t in expected.dloss_dlogprobs if t.numel())
    zero = TOLERANCES["float64"].dloss_dlogprobs * scale
    engine, harness = set(), set()
    samples = policy_samples(case)
    for i, t in case.supervised:
        if samples[i].token_advantages[t] == 0.0:
            continue
        if abs(float(result.dloss_dlogprobs[i][t])) <= zero:
            engine.add((i, t))
        if float(expected.dloss_dlogprobs[i][t]) == 0.0:
            harness.add((i, t))
    examples = [f"clipped by the definition, not by the engine: {locate(*p)} ({describe_branch(case, expected, *p)})"
                for p in sorted(harness - engine)[:2]]
    examples += [f"clipped by the engine, not by the definition: {locate(*p)} ({describe_branch(case, expected, *p)})"
                 for p in sorted(engine - harness)[:2]]
    return Comparison(
        arms=Arms(arm, HARNESS), quantity="clipped_set", item="", metric="mismatched", observed=float(len(engine ^ harness)),
        threshold=0.0, where="; ".join(examples) or f"{len(harness)} of {len(case.supervised)} loss tokens clipped, identical",
    )


def compare_policy(case: Case, result: StepResult, tol: Tolerance, locate: Locate, arm: ArmId | str) -> list[Comparison]:
    """Every check of a policy-loss result against its definition, evaluated at the engine's own log-probs."""
    expected = expected_loss(case, result.logprobs)
    definition = definition_at(case, result, expected)
    rows = [] if case.loss.entropy_coef else [compare_policy_loss(result, expected, tol, arm, definition)]
    if result.dloss_dlogprobs is not None:
        rows.append(compare_policy_weights(case, result, expected, tol, locate, arm, definition))
        if not case.loss.kl_coef:
            rows.append(compare_clipped_set(case, result, expected, locate, arm))
    if case.loss.entropy_coef:
        rows.append(compare_entropy_term(case, result, expected, tol, arm))
    return rows


def compare_ratio_is_one(case: Case, result: StepResult, tol: Tolerance, locate: Locate, arm: ArmId | str) -> Comparison:
    """With old log-probs from the same policy, exp(logp - old) = 1 for every token of every sample."""
    worst, where = 0.0, ""
    olds = [torch.tensor(sample.old_logprobs, dtype=torch.float64) for sample in case.samples]
    for i, (lp, old) in enumerate(zip(result.logprobs, olds)):
        error = (torch.exp(lp.double()[1:] - old[1:]) - 1.0).abs()
        if error.numel() and float(error.max()) > worst:
            worst, where = float(error.max()), locate(i, int(error.argmax()) + 1)
    return Comparison(arms=Arms(arm, HARNESS), quantity="ratio", item="exp(logp - old)", metric="max_abs(r - 1)", observed=worst,
                      **at_least(tol.by("logprobs"), ratio_term(rounding_of(case.dtype), result.logprobs, olds)), where=where)


def compare_entropy_term(case: Case, result: StepResult, expected: Expected, tol: Tolerance, arm: ArmId | str) -> Comparison:
    """E = (the definition without entropy - the reported loss) / entropy_coef is the aggregated entropy, a
    weighted sum of per-token entropies: 0 < E <= log(V) * sum(w).

    Not an equality (the engine does not report the distribution), but it fails when the bonus is
    missing, has the wrong sign, or is normalised by a count that is too small."""
    weight = math.fsum(float(w.sum()) for w in token_weights(case))
    bound = math.log(case.model.vocab_size) * weight
    entropy = (expected.loss - result.loss) / case.loss.entropy_coef
    outside = math.inf if entropy <= 0 else max(0.0, entropy / bound - 1.0)
    return Comparison(
        arms=Arms(arm, HARNESS), quantity="entropy_term", item="", metric="rel excess over (0, log V * sum w]", observed=outside,
        **tol.by("loss"),
        where=f"aggregated entropy E = {entropy:.6g}, bound log(V) * sum(w) = {bound:.6g}",
    )
