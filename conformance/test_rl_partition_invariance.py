"""rl_loss_aggregation over hypothesis-generated partitions: for any split, in any order, packed or
unpacked, every aggregation mode equals its global definition token by token, and nothing depends
on the split.

Where the engine pins a known finding on rl_loss_aggregation, a failing example is an expected
failure (conformance/known_findings.py).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from packcheck.conformance.known_findings import check_property, property_settings
from packcheck.conformance.property_failure import PropertyFailed, property_report
from packcheck.harness.compare import Arms, compare_policy, compare_results
from packcheck.harness.contract import UNPACKED, Aggregation, packed
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.data.strategies import partitions
from packcheck.harness.engines import finding_for
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios.rl_loss_aggregation import ROLLOUT, SEQ_LEN, build, policy_arm

pytestmark = pytest.mark.packcheck_scenario("rl_loss_aggregation")  # deselected when --scenario leaves rl_loss_aggregation out

LAYOUTS = {"packed": packed(SEQ_LEN), "unpacked": UNPACKED}


def test_policy_loss_equals_its_definition_for_any_partition(request, engine, run_arm, family, dtype, device, attention, packcheck_floors,
                                                             packcheck_inputs):
    setting = setting_for(family, dtype, device, attention, packcheck_inputs)
    tolerance = setting.tolerance(packcheck_floors)  # as `packcheck run` judges the setting: its model's size, --noise-floors
    rollout = build(setting)[ROLLOUT]
    if engine.unsupported_reason(rollout):
        pytest.skip(f"unsupported: {engine.unsupported_reason(rollout)}")

    def run(case):
        return run_arm(engine.spec, case)

    results = {ROLLOUT: run(rollout)}
    whole = {}  # mode -> the packed one-micro-batch result every partition, in either layout, must reproduce
    finding = finding_for(engine.known_findings, "rl_loss_aggregation", family)

    @given(partitions(len(SKEWED_LENGTHS)), st.sampled_from(list(Aggregation)), st.sampled_from(list(LAYOUTS)))
    @property_settings(finding)
    def check(partition, mode, layout):
        if mode not in whole:
            whole[mode] = run(policy_arm(setting, results, mode, "clip", "one", LAYOUTS["packed"], None))
        case = policy_arm(setting, results, mode, "clip", f"{layout}-{partition.describe()}", LAYOUTS[layout], partition)
        result = run(case)
        locate = lambda i, t: f"sample {i} token {t}"  # noqa: E731
        rows = compare_policy(case, result, tolerance, locate, case.name)
        rows += compare_results(Arms(case.name, "one"), result, whole[mode], tolerance, locate)
        failed = [c for c in rows if not c.passed]
        if failed:
            raise PropertyFailed(property_report(
                scenario="rl_loss_aggregation", engine_spec=engine.spec, family=family, dtype=dtype, device=device,
                example=f"{mode.value} over the {layout} partition {partition.describe()}", test=request.node.name, failed=failed))

    check_property(check, finding)
