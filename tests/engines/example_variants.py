"""The worked example of docs/adapters.md with the classic gradient-accumulation bug, for
tests/test_worked_example.py."""

from __future__ import annotations

import torch

from impls.example.minimal_engine import MinimalEngine
from harness.contract import Case


class MinimalEngineMeanOfMeans(MinimalEngine):
    name = "example.minimal.mean-of-means"

    @staticmethod
    def denominator(case: Case, micro_batch_mask: torch.Tensor) -> float:
        return float(micro_batch_mask.sum()) * len(case.partition.per_rank[0])  # each micro-batch's own mean / steps
