"""trl_sft: TRL builds labels from the Case's loss mask, its padding-free batches hold exactly the
Case's samples, and what it cannot do is rejected."""

from __future__ import annotations

import pytest
from packcheck.harness.contract import Layout, LayoutKind, Partition, packed
from packcheck.harness.data.samples import MASK_EDGE_CASES
from packcheck.harness.engines import UnsupportedCase
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.impls.adapters.hf_common.capture import StepCapture
from packcheck.impls.adapters.hf_common.rows import spans
from packcheck.impls.adapters.trl_sft.engine import TrlSftEngine

PARTITION = Partition.single_rank([(0, 1, 2, 3), (4, 5, 6, 7, 8)])


def case_for(layout):
    setting = setting_for("llama", "float32", "cpu")
    return arm(setting, "t", samples_for(setting, MASK_EDGE_CASES), layout, PARTITION)


def test_padding_free_batches_hold_the_samples_with_labels_from_the_loss_mask():
    case = case_for(packed(40))
    capture = StepCapture()
    trainer = TrlSftEngine().build_trainer(case, capture, "/tmp/packcheck-adapter-test")
    capture.attach(trainer.model)
    trainer.train()
    assert len(capture.micro_batches) == 2
    for mb, sample_ids in zip(capture.micro_batches, PARTITION.micro_batches):
        assert "attention_mask" not in mb.inputs and mb.inputs["input_ids"].shape[0] == 1
        for span in spans(mb.inputs, sample_ids, case.samples):
            sample = case.samples[span.sample]
            labels = mb.inputs["labels"][0, span.start:span.start + len(sample.input_ids)].tolist()
            assert labels == [t if m else -100 for t, m in zip(sample.input_ids, sample.loss_mask)]
    assert capture.counts == [case.num_loss_tokens]


def test_left_padding_is_rejected_not_computed():
    case = case_for(Layout(kind=LayoutKind.UNPACKED, padding_side="left"))
    with pytest.raises(UnsupportedCase, match="right only"):
        TrlSftEngine().run(case)
