"""A loss is compared as rel_nats: relative at one nat and above, absolute (nats) below. A policy loss near zero is
a difference of terms of about a nat: its relative error measured the cancellation (an H200 float32 run of the
reference: -1.5187e-4 against -1.5157e-4, 3e-7 nats apart, 1.9e-3 relative, 194x the old tolerance), not the engine."""

from __future__ import annotations

from packcheck.harness.compare import Arms, compare_scalars, tolerance_for
from packcheck.harness.compare.metrics import rel, rel_nats
from packcheck.harness.contract import StepResult


def result(loss: float) -> StepResult:
    return StepResult(logprobs=[], loss=loss, num_loss_tokens=10, grads={})


def loss_row(observed: float, reference: float):
    rows = compare_scalars(Arms("uneven", "one"), result(observed), result(reference), tolerance_for("float32"))
    return next(c for c in rows if c.quantity == "loss")


def test_a_loss_near_zero_is_judged_in_nats():
    near_zero = loss_row(-1.51868909597e-4, -1.51574611664e-4)
    assert near_zero.metric == "rel_nats" and near_zero.passed, near_zero.headline()
    assert rel(-1.51868909597e-4, -1.51574611664e-4) > tolerance_for("float32").loss, "the relative error would have failed it"


def test_a_loss_of_a_nat_or_more_is_still_judged_relatively_and_a_real_difference_fails():
    assert rel_nats(5.0005, 5.0) == rel(5.0005, 5.0)
    assert not loss_row(5.0005, 5.0).passed  # 1e-4 relative: a normaliser off by 1 in 10^4 tokens
    assert not loss_row(2e-4, 1e-4).passed  # a near-zero loss doubled: 1e-4 nats
