"""hf_trainer: the Trainer's batches hold exactly the Case's samples, and the legacy-GA variant
really takes the Trainer's other normalisation path."""

from __future__ import annotations

import pytest
import torch
from packcheck.harness.contract import UNPACKED, Layout, LayoutKind, Partition, packed
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.impls.adapters.hf_common.capture import StepCapture
from packcheck.impls.adapters.hf_common.rows import TranslationError, spans
from packcheck.impls.adapters.hf_trainer.engine import HfTrainerEngine
from packcheck.impls.adapters.hf_trainer.legacy_ga import LegacyGaEngine

UNEVEN = Partition.single_rank([(0, 7), (1, 2, 4), (3, 5, 6, 8)])


def case_for(layout, partition=UNEVEN):
    setting = setting_for("llama", "float32", "cpu")
    samples = samples_for(setting, SKEWED_LENGTHS)
    return arm(setting, "t", samples, layout, partition)


def captured_batches(engine, case) -> list[dict[str, torch.Tensor]]:
    capture = StepCapture()
    trainer = engine.build_trainer(case, capture, "/tmp/packcheck-adapter-test")
    capture.attach(trainer.model)
    trainer.train()
    return [mb.inputs for mb in capture.micro_batches]


@pytest.mark.parametrize("layout", [packed(48), UNPACKED, Layout(kind=LayoutKind.UNPACKED, padding_side="left")], ids=str)
def test_each_micro_batch_holds_exactly_its_samples_with_their_labels(layout):
    case = case_for(layout)
    batches = captured_batches(HfTrainerEngine(), case)
    assert len(batches) == len(UNEVEN.micro_batches)
    for inputs, sample_ids in zip(batches, UNEVEN.micro_batches):
        assert ("attention_mask" in inputs) == (layout.kind is LayoutKind.UNPACKED)
        for span in spans(inputs, sample_ids, case.samples):
            sample = case.samples[span.sample]
            n = len(sample.input_ids)
            labels = inputs["labels"][span.row, span.start:span.start + n].tolist()
            assert labels == [t if m else -100 for t, m in zip(sample.input_ids, sample.loss_mask)]
        # nothing but the samples and padding under label -100 in the batch
        assert int((inputs["labels"] != -100).sum()) == sum(case.samples[i].num_targets for i in sample_ids)


def test_a_batch_that_lost_a_token_is_refused():
    case = case_for(packed(48))
    inputs = captured_batches(HfTrainerEngine(), case)[0]
    cut = {k: v[:, :-1] for k, v in inputs.items()}
    with pytest.raises(TranslationError):
        spans(cut, UNEVEN.micro_batches[0], case.samples)


def test_the_trainer_counts_the_case_tokens_and_legacy_ga_changes_only_the_normalisation():
    case = case_for(packed(48))
    fixed, legacy = HfTrainerEngine().run(case), LegacyGaEngine().run(case)
    assert fixed.num_loss_tokens == legacy.num_loss_tokens == case.num_loss_tokens
    for a, b in zip(fixed.logprobs, legacy.logprobs):
        torch.testing.assert_close(a, b)  # same forward
    rel = max(((fixed.grads[n] - legacy.grads[n]).norm() / fixed.grads[n].norm()).item() for n in fixed.grads)
    assert rel > 1e-3, f"the legacy path should weight uneven micro-batches differently; grads differ by only {rel:.1e}"
