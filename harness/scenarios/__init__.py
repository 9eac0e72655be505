"""The golden scenarios, one declarative entry each, in a registry (in the order runs list them)."""

from harness.scenarios.base import Judgement, Scenario, Setting
from harness.scenarios.cp_vs_nocp import CP_VS_NOCP
from harness.scenarios.dp_cp_reduction import DP_CP_REDUCTION
from harness.scenarios.document_isolation import DOCUMENT_ISOLATION
from harness.scenarios.golden_regression import GOLDEN_REGRESSION
from harness.scenarios.mask_alignment import MASK_ALIGNMENT
from harness.scenarios.microbatch_invariance import MICROBATCH_INVARIANCE
from harness.scenarios.packed_vs_unpacked import PACKED_VS_UNPACKED
from harness.scenarios.registry import SCENARIOS, get_scenario, register_scenario
from harness.scenarios.token_conservation import TOKEN_CONSERVATION

for _scenario in (PACKED_VS_UNPACKED, DOCUMENT_ISOLATION, MICROBATCH_INVARIANCE, MASK_ALIGNMENT, TOKEN_CONSERVATION, GOLDEN_REGRESSION,
                  CP_VS_NOCP, DP_CP_REDUCTION):
    register_scenario(_scenario)

__all__ = ["SCENARIOS", "Judgement", "Scenario", "Setting", "get_scenario", "register_scenario"]
