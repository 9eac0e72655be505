"""The typed, serialisable contract between the harness and any engine."""

from packcheck.harness.contract.advantage import AdvantageEstimator
from packcheck.harness.contract.case import DTYPES, Case
from packcheck.harness.contract.errors import ContractError
from packcheck.harness.contract.images import Image, VisionSpec
from packcheck.harness.contract.layout import UNPACKED, Layout, LayoutKind, packed
from packcheck.harness.contract.loss import SFT_TOKEN_MEAN, Aggregation, LossKind, LossSpec
from packcheck.harness.contract.model import ModelSpec
from packcheck.harness.contract.optimizer import OptimizerSpec
from packcheck.harness.contract.pad_poison import CANARY_LOGIT, PadPoison, canary_logprob
from packcheck.harness.contract.parallel import SINGLE_PROCESS, ParallelPlan
from packcheck.harness.contract.partition import Partition
from packcheck.harness.contract.result import OPTIONAL_REPORTS, StepResult
from packcheck.harness.contract.samples import Sample
from packcheck.harness.contract.token_budget import TokenBudget

__all__ = [
    "CANARY_LOGIT", "DTYPES", "OPTIONAL_REPORTS", "SFT_TOKEN_MEAN", "SINGLE_PROCESS", "UNPACKED",
    "AdvantageEstimator", "Aggregation", "Case", "ContractError", "Image", "Layout", "LayoutKind", "LossKind", "LossSpec", "ModelSpec",
    "OptimizerSpec", "PadPoison", "ParallelPlan", "Partition", "Sample", "StepResult", "TokenBudget", "VisionSpec", "canary_logprob",
    "packed",
]
