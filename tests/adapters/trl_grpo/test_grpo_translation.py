"""trl_grpo: a sample becomes TRL's prompt and completion with its loss mask in `tool_mask` and its RL
fields aligned to the completion's log-probs; what GRPOTrainer cannot do is rejected, never computed."""

from __future__ import annotations

import pytest
import torch
from packcheck.harness.contract import UNPACKED, Layout, LayoutKind, LossSpec, packed
from packcheck.harness.data.rl import rollout_samples
from packcheck.harness.data.samples import MASK_EDGE_CASES
from packcheck.harness.engines import UnsupportedCase
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.impls.adapters.trl_grpo.batch import micro_batch_inputs, split
from packcheck.impls.adapters.trl_grpo.engine import TrlGrpoEngine
from packcheck.impls.adapters.trl_grpo.variants import TrlGrpoPerMicroBatch


def case_for(layout=UNPACKED, loss=LossSpec(kind="ppo_clip")):
    setting = setting_for("llama", "float32", "cpu")
    samples = samples_for(setting, MASK_EDGE_CASES)
    return arm(setting, "t", rollout_samples(samples) if loss.is_policy else samples, layout, loss=loss)


def test_prompt_and_completion_rebuild_each_sample_with_its_loss_mask():
    case = case_for()
    ids = tuple(range(len(case.samples)))
    inputs = micro_batch_inputs(case, ids, torch.float32)
    for row, sample in enumerate(case.samples):
        tokens = torch.cat([inputs["prompt_ids"][row][inputs["prompt_mask"][row].bool()],
                            inputs["completion_ids"][row][inputs["completion_mask"][row].bool()]])
        assert tokens.tolist() == list(sample.input_ids)
        start = split(sample).start
        loss_mask = (inputs["completion_mask"][row] * inputs["tool_mask"][row])[:len(sample.input_ids) - start]
        assert [0] * start + loss_mask.tolist() == list(sample.loss_mask)
        assert sample.loss_mask[start:start + 1] in ((1,), ())  # the completion starts at the first target
    assert int((inputs["completion_mask"] * inputs["tool_mask"]).sum()) == case.num_loss_tokens


@pytest.mark.parametrize("layout, match", [(packed(40), "layout 'packed'"),
                                           (Layout(kind=LayoutKind.UNPACKED, padding_side="left"), "left")])
def test_layouts_grpo_cannot_run_are_rejected(layout, match):
    with pytest.raises(UnsupportedCase, match=match):
        TrlGrpoEngine().run(case_for(layout))


@pytest.mark.parametrize("engine, mode", [(TrlGrpoEngine, "seq-mean-token-mean"), (TrlGrpoPerMicroBatch, "seq-mean-token-sum")])
def test_aggregations_without_a_loss_type_are_rejected(engine, mode):
    with pytest.raises(UnsupportedCase, match=mode):
        engine().run(case_for(loss=LossSpec(kind="ppo_clip", aggregation=mode)))


def test_entropy_bonus_is_rejected_trl_takes_it_per_micro_batch():
    with pytest.raises(UnsupportedCase, match="entropy"):
        TrlGrpoEngine().run(case_for(loss=LossSpec(kind="ppo_clip", entropy_coef=0.05)))


def test_sft_is_rejected():
    with pytest.raises(UnsupportedCase, match="sft_token_mean"):
        TrlGrpoEngine().run(case_for(loss=LossSpec()))
