"""The golden scenarios, one declarative entry each, in a registry (in the order runs list them)."""

from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario
from packcheck.harness.scenarios.cp_vs_nocp import CP_VS_NOCP
from packcheck.harness.scenarios.document_isolation import DOCUMENT_ISOLATION
from packcheck.harness.scenarios.dp_cp_reduction import DP_CP_REDUCTION
from packcheck.harness.scenarios.ep_vs_noep import EP_VS_NOEP
from packcheck.harness.scenarios.golden_regression import GOLDEN_REGRESSION
from packcheck.harness.scenarios.gradient_oracle import GRADIENT_ORACLE
from packcheck.harness.scenarios.linear_attention_reset import LINEAR_ATTENTION_RESET
from packcheck.harness.scenarios.mask_alignment import MASK_ALIGNMENT
from packcheck.harness.scenarios.microbatch_invariance import MICROBATCH_INVARIANCE
from packcheck.harness.scenarios.optimizer_step import OPTIMIZER_STEP
from packcheck.harness.scenarios.oracle_agreement import ORACLE_AGREEMENT
from packcheck.harness.scenarios.packed_vs_unpacked import PACKED_VS_UNPACKED
from packcheck.harness.scenarios.pp_vs_nopp import PP_VS_NOPP
from packcheck.harness.scenarios.poisoned_pads import POISONED_PADS
from packcheck.harness.scenarios.registry import SCENARIOS, get_scenario, register_scenario
from packcheck.harness.scenarios.rl_group_advantages import RL_GROUP_ADVANTAGES
from packcheck.harness.scenarios.rl_loss_aggregation import RL_LOSS_AGGREGATION
from packcheck.harness.scenarios.rl_step0_ratio import RL_STEP0_RATIO
from packcheck.harness.scenarios.token_conservation import TOKEN_CONSERVATION
from packcheck.harness.scenarios.token_skew_collectives import TOKEN_SKEW_COLLECTIVES
from packcheck.harness.scenarios.tp_vs_notp import TP_VS_NOTP
from packcheck.harness.scenarios.vlm_collective_symmetry import VLM_COLLECTIVE_SYMMETRY

for _scenario in (PACKED_VS_UNPACKED, DOCUMENT_ISOLATION, MICROBATCH_INVARIANCE, MASK_ALIGNMENT, TOKEN_CONSERVATION, POISONED_PADS,
                  GOLDEN_REGRESSION, CP_VS_NOCP, DP_CP_REDUCTION, TP_VS_NOTP, PP_VS_NOPP, EP_VS_NOEP, RL_LOSS_AGGREGATION, RL_STEP0_RATIO, RL_GROUP_ADVANTAGES,
                  LINEAR_ATTENTION_RESET, VLM_COLLECTIVE_SYMMETRY, TOKEN_SKEW_COLLECTIVES, OPTIMIZER_STEP, GRADIENT_ORACLE,
                  ORACLE_AGREEMENT):
    register_scenario(_scenario)

__all__ = ["SCENARIOS", "Judgement", "Scenario", "Setting", "get_scenario", "register_scenario"]
