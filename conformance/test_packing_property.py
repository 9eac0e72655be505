"""packed_vs_unpacked over hypothesis-drawn samples: any lengths (edge lengths often: a 1-token document, documents
shorter than a short convolution's width, odd lengths), any mask shapes, packed rows against one padded row each.

Where the engine pins a known finding on packed_vs_unpacked, a failing example is an expected failure
(conformance/known_findings.py).
"""

from __future__ import annotations

import pytest
from hypothesis import given

from packcheck.conformance.known_findings import check_property, property_settings
from packcheck.conformance.property_failure import PropertyFailed, property_report
from packcheck.harness.contract import UNPACKED, packed
from packcheck.harness.data.strategies import samples
from packcheck.harness.engines import finding_for
from packcheck.harness.judging.cases import arm, for_model
from packcheck.harness.judging.judgement import Judgement
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios.packed_vs_unpacked import PACKED_VS_UNPACKED, SEQ_LEN

# deselected when --scenario leaves packed_vs_unpacked out; slow: 24 arms per family, out of packcheck's own default CI
# (nox -s slow runs it), in every engine's conformance run
pytestmark = [pytest.mark.packcheck_scenario("packed_vs_unpacked"), pytest.mark.slow]


def test_packing_is_invisible_for_any_samples(request, engine, run_arm, family, dtype, device, attention, packcheck_floors,
                                               packcheck_inputs):
    setting = setting_for(family, dtype, device, attention, packcheck_inputs)
    tolerance = setting.tolerance(packcheck_floors)  # as `packcheck run` judges the setting: its model's size, --noise-floors
    finding = finding_for(engine.known_findings, "packed_vs_unpacked", family)

    @given(samples(setting.model.vocab_size, max_len=SEQ_LEN))
    @property_settings(finding)
    def check(drawn):
        drawn = for_model(setting, drawn)  # images placed in them for a vision-language family
        cases = {"unpacked": arm(setting, "unpacked", drawn, UNPACKED), "packed": arm(setting, "packed", drawn, packed(SEQ_LEN))}
        if reason := engine.unsupported_reason(cases["packed"]) or engine.unsupported_reason(cases["unpacked"]):
            pytest.skip(f"unsupported: {reason}")
        judgement = Judgement(setting=setting, cases=cases, results={name: run_arm(engine.spec, case) for name, case in cases.items()},
                              tolerance=tolerance)
        failed = [c for c in PACKED_VS_UNPACKED.judge(judgement) if not c.passed]
        if failed:
            raise PropertyFailed(property_report(
                scenario=PACKED_VS_UNPACKED.name, engine_spec=engine.spec, family=family, dtype=dtype, device=device,
                example=f"samples of lengths {[len(s.input_ids) for s in drawn]}", test=request.node.name, failed=failed,
                diagnose=lambda: PACKED_VS_UNPACKED.diagnose(judgement, failed)))

    check_property(check, finding)
