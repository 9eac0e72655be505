"""The family's golden case: the one case whose float64 result the reference stores as a golden
(golden_regression judges an engine's run of it; the diagnoses read an arm against it)."""

from __future__ import annotations

import dataclasses

from packcheck.harness.contract import Case, OptimizerSpec, Partition, packed
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.judgement import Setting

SEQ_LEN = 48
GOLDEN_ARM = "golden_case"


def golden_case(setting: Setting) -> Case:
    """Packed rows, an uneven two-micro-batch partition, an AdamW step; its whole sample set in a smaller setting too
    (the golden is of the whole case)."""
    setting = dataclasses.replace(setting, smaller=None)
    samples = samples_for(setting, MIXED_DOCUMENTS)
    partition = Partition.single_rank([(0, 1, 2, 3), (4, 5, 6, 7, 8, 9)])
    return arm(setting, GOLDEN_ARM, samples, packed(SEQ_LEN), partition, optimizer=OptimizerSpec())
