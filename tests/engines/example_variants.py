"""The worked example of docs/adapters.md with the classic gradient-accumulation bug, for
tests/test_worked_example.py."""

from __future__ import annotations

from dataclasses import replace

import torch

from packcheck.impls.example.minimal_engine import MinimalEngine
from packcheck.harness.contract import Case, LayoutKind


class MinimalEngineMeanOfMeans(MinimalEngine):
    name = "example.minimal.mean-of-means"

    @staticmethod
    def denominator(case: Case, micro_batch_mask: torch.Tensor) -> float:
        return float(micro_batch_mask.sum()) * len(case.partition.per_rank[0])  # each micro-batch's own mean / steps


class MinimalEngineUnpackedOnly(MinimalEngine):
    """An engine that never packs: judged on the unpacked arms of the scenarios that have them."""

    name = "example.minimal.unpacked-only"
    capabilities = replace(MinimalEngine.capabilities, layouts=frozenset({LayoutKind.UNPACKED}),
                           attention={"auto": frozenset({LayoutKind.UNPACKED})})


class MinimalEngineSupportsNothing(MinimalEngine):
    name = "example.minimal.nothing"
    capabilities = replace(MinimalEngine.capabilities, families=frozenset({"no_such_family"}))


class MinimalEngineFloat64(MinimalEngine):
    """The worked example run at float64, as an author who has not read about transformers' float32 insides would:
    the model's parameters are float64, its RMSNorm and RoPE angles are computed in float32 (tests/test_float32_inside.py)."""

    name = "example.minimal.float64"
    capabilities = replace(MinimalEngine.capabilities, dtypes=frozenset({"float64"}))


class MinimalEngineNoDtype(MinimalEngine):
    """Declares no dtype: `--dtype auto` has nothing to choose from (tests/test_dtype_auto.py)."""

    name = "example.minimal.no-dtype"
    capabilities = replace(MinimalEngine.capabilities, dtypes=frozenset())


class MinimalEngineBoundaryLabel(MinimalEngine):
    """The worked example with a label across a packed boundary: a document's first token is a loss target, predicted
    from the document before it in the row (tests/test_worked_example.py)."""

    name = "example.minimal.boundary-label"

    @staticmethod
    def batch(case: Case, rows):
        input_ids, position_ids, attention_mask, labels, mask = MinimalEngine.batch(case, rows)
        for b, row in enumerate(rows):
            for start in row.starts(case)[1:]:  # every document but the row's first
                mask[b, start] = 1.0
        return input_ids, position_ids, attention_mask, labels, mask


class MinimalEngineBoundaryLabelNoEntry0(MinimalEngineBoundaryLabel):
    """The boundary-label bug in an adapter that fills dloss_dlogprobs from entry 1 only, as the worked example once did:
    the validator warns that the loss holds weight it does not report (harness/engines/boundary_weights.py)."""

    name = "example.minimal.boundary-label.no-entry-0"

    @staticmethod
    def scatter(case: Case, rows, lp, dlp, logprobs, weights) -> None:
        MinimalEngine.scatter(case, rows, lp, dlp, logprobs, weights)
        for weight in weights:
            weight[0] = 0.0
