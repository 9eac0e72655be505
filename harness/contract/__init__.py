"""The typed, serialisable contract between the harness and any engine."""

from harness.contract.case import DTYPES, Case
from harness.contract.errors import ContractError
from harness.contract.layout import UNPACKED, Layout, LayoutKind, packed
from harness.contract.loss import SFT_TOKEN_MEAN, Aggregation, LossKind, LossSpec
from harness.contract.model import ModelSpec
from harness.contract.optimizer import OptimizerSpec
from harness.contract.parallel import SINGLE_PROCESS, ParallelPlan
from harness.contract.partition import Partition
from harness.contract.result import OPTIONAL_REPORTS, StepResult
from harness.contract.samples import Sample

__all__ = [
    "DTYPES", "OPTIONAL_REPORTS", "SFT_TOKEN_MEAN", "SINGLE_PROCESS", "UNPACKED",
    "Aggregation", "Case", "ContractError", "Layout", "LayoutKind", "LossKind", "LossSpec", "ModelSpec",
    "OptimizerSpec", "ParallelPlan", "Partition", "Sample", "StepResult", "packed",
]
