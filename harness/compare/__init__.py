"""Metrics, the tolerance policy, comparisons between arms and against the harness's own counts."""

from packcheck.harness.compare.arm_id import ArmId, Pass, Role
from packcheck.harness.compare.arms import compare_logprobs, compare_results, compare_scalars, compare_tensors
from packcheck.harness.compare.comparison import GOLDEN, HARNESS, NOT_ARMS, Arms, Comparison
from packcheck.harness.compare.expected import compare_count, compare_loss_with_logprobs, compare_supervised_set
from packcheck.harness.compare.policy import compare_policy, compare_ratio_is_one
from packcheck.harness.compare.tolerances import NOISE_FACTOR, TOLERANCES, Tolerance, tolerance_for, tolerance_from_floor

__all__ = [
    "GOLDEN", "HARNESS", "NOISE_FACTOR", "NOT_ARMS", "TOLERANCES", "ArmId", "Arms", "Pass", "Role", "Comparison", "Tolerance", "compare_count", "compare_logprobs", "compare_loss_with_logprobs",
    "compare_policy", "compare_ratio_is_one", "compare_results", "compare_scalars", "compare_supervised_set", "compare_tensors",
    "tolerance_for", "tolerance_from_floor",
]
