"""Comparison.to_json, built from the fields without dataclasses.asdict's deep copy (a 1,250-row verdict's record took
0.3 s in asdict), writes results.jsonl's rows byte for byte as the asdict form did: every field in its order, nested
arms and bound replaced by their JSON."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest

from packcheck.harness.compare import Arms
from packcheck.harness.compare.bound import RULE, Bound, Source
from packcheck.harness.compare.comparison import GOLDEN, HARNESS, Comparison
from packcheck.harness.run_dir.results import rows_of
from packcheck.harness.judging.status import Status
from packcheck.harness.run.verdict import Verdict


def _as_asdict_wrote_it(c: Comparison) -> dict:
    """to_json as it was before: asdict(self) with the same replacements."""
    arm, against, ratio = c.arms.arm, c.arms.against, c.floor_ratio
    typed = not isinstance(against, str)
    return (asdict(c) | {"arms": str(c.arms), "arm": str(arm), "against": str(against), "passed": c.passed, "margin": c.margin,
                         "bound": c.bound.to_json(), "arm_role": arm.role.value, "arm_pass": arm.pass_.value,
                         "against_role": against.role.value if typed else None, "against_pass": against.pass_.value if typed else None}
            | ({} if ratio is None else {"floor_ratio": ratio}))


COMPARISONS = [
    Comparison(arms=Arms("packed", "unpacked"), quantity="grad", item="model.embed_tokens.weight", metric="rel_l2", observed=1.5e-3,
               threshold=2e-2, bound=Bound(field="grad", source=Source.CALIBRATED, floor=1e-4)),
    Comparison(arms=Arms("packed", "unpacked"), quantity="grad", item="lm_head.weight", metric="max_rel", observed=math.inf,
               threshold=0.0, where="element (3, 4)"),
    Comparison(arms=Arms("packed", HARNESS), quantity="num_loss_tokens", item="", metric="abs", observed=0.0, threshold=0.0),
    Comparison(arms=Arms("packed", GOLDEN), quantity="loss", item="", metric="rel_nats", observed=math.nan, threshold=1e-6, bound=RULE),
]


@pytest.mark.parametrize("comparison", COMPARISONS, ids=lambda c: f"{c.quantity}-{c.metric}")
def test_to_json_is_what_asdict_wrote(comparison):
    assert list(comparison.to_json()) == list(_as_asdict_wrote_it(comparison))
    assert repr(comparison.to_json()) == repr(_as_asdict_wrote_it(comparison))


def test_results_jsonl_rows_are_byte_identical():
    verdict = Verdict(engine="reference", engine_spec="reference", family="qwen3", scenario="packed_vs_unpacked", dtype="bfloat16",
                      device="cuda", status=Status.PASS, comparisons=tuple(COMPARISONS))
    expected = [{key: getattr(verdict, key) for key in ("engine", "family", "scenario", "dtype", "device", "attention")}
                | _as_asdict_wrote_it(c) for c in COMPARISONS]
    from packcheck.harness.run_dir.results import _finite
    assert json.dumps(rows_of(verdict)) == json.dumps([_finite(row) for row in expected])
