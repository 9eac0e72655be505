"""The rounding-derived term of a float32/bfloat16 comparison (harness/compare/rounding_bound.py), by hand: the spacing of
a value in its dtype, each quantity's bound through its definition, max(table, derived), and what a comparison records
and prints of the term that bound it. float64 derives nothing."""

from __future__ import annotations

import math

import pytest
import torch

from packcheck.harness.compare import Arms, Comparison, tolerance_for
from packcheck.harness.compare.bound import Bound, Source
from packcheck.harness.compare.comparison import HARNESS
from packcheck.harness.compare.rounding_bound import Definition, Derived, at_least, ratio_term, rounding_of
from packcheck.harness.losses import Expected

BF16 = rounding_of("bfloat16")
LN_V = math.log(151936)  # 11.93: a seeded 0.6b model's log-probs sit near -ln(V)


@pytest.mark.parametrize("dtype,value,spacing", [
    ("bfloat16", -LN_V, 0.0625), ("bfloat16", -math.log(128), 0.03125), ("bfloat16", 16.0, 0.125), ("bfloat16", 0.033, 2.0**-5 * 2.0**-7),
    ("float32", -LN_V, 8 * 2.0**-23), ("float32", 1.0, 2.0**-23), ("bfloat16", 0.0, 0.0),
])
def test_spacing_is_the_gap_to_the_neighbour_away_from_zero(dtype, value, spacing):
    assert float(rounding_of(dtype).spacing(value)) == spacing


@pytest.mark.parametrize("dtype,bits", [(torch.bfloat16, torch.int16), (torch.float32, torch.int32)])
def test_spacing_is_the_distance_to_the_next_value_of_the_dtype(dtype, bits):
    x = torch.tensor([0.03125, 0.0322581, 1.0, 4.85, 8.0, 11.9, 15.99, 16.0]).to(dtype)
    following = (x.view(bits) + 1).view(dtype)  # the next larger value: its bit pattern plus one
    name = "bfloat16" if dtype is torch.bfloat16 else "float32"
    assert torch.equal(rounding_of(name).spacing(x), (following.double() - x.double()))


def test_float64_derives_nothing():
    assert rounding_of("float64") is None


def definition(lp: float, weight: float, slope: float) -> Definition:
    lp_T = torch.tensor([0.0, lp], dtype=torch.float64)
    return Definition(BF16, [lp_T], Expected(loss=weight * lp, dloss_dlogprobs=[torch.tensor([0.0, weight], dtype=torch.float64)],
                                             token_losses=None, weight_slopes=[torch.tensor([0.0, slope], dtype=torch.float64)]))


def test_a_policy_weight_may_move_by_one_spacing_of_its_log_prob():
    """-A r w: its slope is |w|; one spacing at -11.9 is exp(0.0625) - 1 = 6.45% of it, plus two spacings of the
    reported weight's own rounding (WEIGHT_ULPS)."""
    w = 0.0322581
    derived = definition(-LN_V, w, w).weights_term([[torch.tensor([0.0, w])]], scale=w)
    assert derived.threshold == pytest.approx(math.expm1(0.0625) + 2 * 2.0**-5 * 2.0**-7 / w)
    assert derived.term == "bf16 spacing at |logp| = 11.9: 6.45%"


def test_an_sft_weight_carried_back_through_the_engines_loss_may_be_a_spacing_off():
    """transformers 5.24's Trainer reports a 65-token mean's float32 weight one spacing from -1/65 (the reference rounds it
    once): against the float64 golden, whose weight is exact, that is within the bound (CI, 2026-12-06), and an
    off-by-one count (-1/64) is 25,000 times outside it."""
    exact = -1 / 65
    engine = torch.tensor([0.0, exact], dtype=torch.float32)
    engine[1] = torch.nextafter(engine[1], torch.tensor(0.0))  # one spacing toward zero
    lp_T = torch.tensor([0.0, -5.0], dtype=torch.float64)
    sft = Definition(rounding_of("float32"), [lp_T], Expected(loss=exact * -5.0, dloss_dlogprobs=[torch.tensor([0.0, exact], dtype=torch.float64)],
                                                             token_losses=None, weight_slopes=None))
    truth = [torch.tensor([0.0, exact], dtype=torch.float64)]
    allowed = sft.weights_term([[engine], truth], scale=1 / 65, apart=[lp_T]).threshold
    assert abs(float(engine[1]) - exact) * 65 < allowed
    assert abs(-1 / 64 - exact) * 65 > 25_000 * allowed


def test_a_kl_weight_moves_by_its_own_slope_where_it_cancels():
    """kl_coef (1 - exp(ref - logp)) near ref = logp is ~0, but moves by kl_coef exp(ref - logp) (exp(s) - 1)."""
    derived = definition(-LN_V, 1e-6, 0.1).weights_term([], scale=0.1)
    assert derived.threshold == pytest.approx(math.expm1(0.0625))


def test_two_arms_weights_may_differ_by_their_log_prob_difference_and_both_roundings():
    w = 0.5
    derived = definition(-LN_V, w, w).weights_term([], scale=w, apart=[torch.tensor([0.0, -LN_V - 0.0625], dtype=torch.float64)])
    assert derived.threshold == pytest.approx(math.expm1(0.0625 + 0.0625 + 0.0625))
    assert derived.term.startswith("log-probs 0.0625 nats apart + bf16 spacing")


def test_a_loss_moves_by_the_spacing_through_its_weight_and_the_reported_loss_rounds_once():
    w, s = 0.25, 0.0625
    derived = definition(-LN_V, w, w).loss_term([3.0], against=3.0)
    assert derived.threshold == pytest.approx((s * (w + w * math.expm1(s)) + 2.0**1 * 2.0**-7 / 2) / 3.0)


def test_the_ratio_of_two_reported_log_probs_may_be_off_by_both_spacings():
    lp = [torch.tensor([0.0, -LN_V, -4.0])]
    derived = ratio_term(BF16, lp, [lp[0].clone()])
    assert derived.threshold == pytest.approx(math.expm1(2 * 0.0625))
    assert ratio_term(None, lp, lp) is None


def test_the_threshold_is_the_larger_of_the_table_and_the_derived_term_and_says_which():
    allowed = tolerance_for("bfloat16").by("dloss_dlogprobs")
    assert at_least(allowed, None) is allowed
    assert at_least(allowed, Derived(allowed["threshold"] / 2, "small")) is allowed, "never tighter than the table"
    larger = at_least(allowed, Derived(0.0715, "bf16 spacing at |logp| = 11.9: 6.45%"))
    assert larger["threshold"] == 0.0715
    assert larger["bound"] == Bound(field="dloss_dlogprobs", source=Source.ROUNDING, term="bf16 spacing at |logp| = 11.9: 6.45%",
                                    table=allowed["threshold"])


def test_a_comparison_bound_by_rounding_says_so_in_its_json_and_failing_line():
    bound = at_least(tolerance_for("bfloat16").by("dloss_dlogprobs"), Derived(0.0715, "bf16 spacing at |logp| = 11.9: 6.45%"))
    c = Comparison(arms=Arms("packed", HARNESS), quantity="dloss_dlogprobs", item="policy token weight", metric="max_rel",
                   observed=0.2, **bound)
    assert c.to_json()["bound"] == {"field": "dloss_dlogprobs", "source": "rounding", "floor": None,
                                    "term": "bf16 spacing at |logp| = 11.9: 6.45%", "table": 4 * 3.42e-3}
    assert Bound.from_json(c.to_json()["bound"]) == c.bound
    assert "> allowed 0.0715 (by bf16 spacing at |logp| = 11.9: 6.45%; the table alone: 0.0137)" in c.headline()
    assert c.floor_ratio is None, "a threshold the rounding term set is no multiple of the noise floor"


def test_a_comparison_the_table_bound_writes_its_bound_as_before():
    c = Comparison(arms=Arms("packed", HARNESS), quantity="loss", item="", metric="rel_nats", observed=0.0,
                   **tolerance_for("float64").by("loss"))
    assert c.to_json()["bound"] == {"field": "loss", "source": "table", "floor": None}
    assert "by " not in c.headline()
