"""microbatch_invariance over hypothesis-generated partitions: any split, any order, uneven counts.

Where the engine pins a known finding on microbatch_invariance (harness/engines/findings.py) the
property may fail: a failing partition is an expected failure (conformance/known_findings.py).
"""

from __future__ import annotations

import pytest
from hypothesis import given

from packcheck.conformance.known_findings import check_property, property_settings
from packcheck.conformance.property_failure import PropertyFailed, property_report
from packcheck.harness.compare import Arms, compare_results
from packcheck.harness.contract import UNPACKED, Partition
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.data.strategies import partitions
from packcheck.harness.engines import finding_for
from packcheck.harness.judging.judgement import Judgement
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios.microbatch_invariance import MICROBATCH_INVARIANCE, REFERENCE_ARM, arms_for_partition

pytestmark = pytest.mark.packcheck_scenario("microbatch_invariance")  # deselected when --scenario leaves microbatch_invariance out


@pytest.mark.parametrize("layout", ["packed", "unpacked"])
def test_gradient_is_independent_of_the_partition(request, engine, run_arm, family, dtype, device, attention, packcheck_floors,
                                                   packcheck_inputs, layout):
    setting = setting_for(family, dtype, device, attention, packcheck_inputs)
    tolerance = setting.tolerance(packcheck_floors)  # as `packcheck run` judges the setting: its model's size, --noise-floors
    chosen_layout = UNPACKED if layout == "unpacked" else None
    whole = arms_for_partition(setting, Partition.all_in_one(len(SKEWED_LENGTHS)), chosen_layout)[REFERENCE_ARM]
    if engine.unsupported_reason(whole):
        pytest.skip(f"unsupported: {engine.unsupported_reason(whole)}")
    reference = run_arm(engine.spec, whole)
    finding = finding_for(engine.known_findings, "microbatch_invariance", family)

    @given(partitions(len(SKEWED_LENGTHS)))
    @property_settings(finding)
    def check(partition):
        name = partition.describe()
        case = arms_for_partition(setting, partition, chosen_layout)[name]
        result = run_arm(engine.spec, case)
        failed = [c for c in compare_results(Arms(name, REFERENCE_ARM), result, reference, tolerance, lambda i, t: f"sample {i} token {t}")
                  if not c.passed]
        if failed:
            judgement = Judgement(setting=setting, cases={name: case, REFERENCE_ARM: whole}, results={name: result, REFERENCE_ARM: reference},
                                  tolerance=tolerance)
            raise PropertyFailed(property_report(
                scenario=MICROBATCH_INVARIANCE.name, engine_spec=engine.spec, family=family, dtype=dtype, device=device,
                example=f"the {layout} partition {name}", test=request.node.name, failed=failed,
                diagnose=lambda: MICROBATCH_INVARIANCE.diagnose(judgement, failed)))

    check_property(check, finding)
