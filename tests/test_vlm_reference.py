"""The reference trainer on the vision-language family: the dummy image of a text-only micro-batch
changes nothing, the frozen tower takes no gradient and does not move in the optimizer step (and
the harness refuses results where it does), and MRoPE positions stay global under CP."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from packcheck.harness.contract import OptimizerSpec, ParallelPlan, Partition, packed
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.engines import InvalidResult, resolve_engine, validate_result
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.impls.reference.model.loading import load_model
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step.pipeline import REFERENCE
from packcheck.impls.reference.step.train_step import build_micro_batches
from packcheck.impls.reference.step.vision_step import encode_micro_batch

pytestmark = pytest.mark.xdist_group("vlm-reference")  # case_and_result (a qwen2_5_vl step), shared by every test: one worker runs it once

FROZEN = "model.visual.merger.mlp.2.weight"


@pytest.fixture(scope="module")
def case_and_result():
    setting = setting_for("qwen2_5_vl", "float64", "cpu")
    samples = samples_for(setting, MIXED_DOCUMENTS)
    case = arm(setting, "v", samples, packed(48), Partition(per_rank=(((7, 0, 1, 2), (3, 4), (5, 6, 8, 9)),)),  # 7: the image with 2D positions
               optimizer=OptimizerSpec(lr=1e-2, weight_decay=0.1))
    return case, resolve_engine("reference").run(case)


def test_frozen_tower_has_no_gradient_and_does_not_move(case_and_result):
    case, result = case_and_result
    assert validate_result("reference", case, result) is result
    assert not any(name.startswith("model.visual.") for name in result.grads)
    assert any(name.startswith("model.language_model.") for name in result.grads)
    assert FROZEN in result.params_after


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda r: dataclasses.replace(r, grads={**r.grads, FROZEN: torch.zeros_like(r.params_after[FROZEN])}),
     r"gradients for 1 frozen parameters, e.g. \['model.visual.merger.mlp.2.weight'\].*report the trainable parameters only"),
    (lambda r: dataclasses.replace(r, params_after={**r.params_after, FROZEN: r.params_after[FROZEN] * (1 - 1e-3)}),
     r"params_after\['model.visual.merger.mlp.2.weight'\] moved by up to .* although it is frozen.*weight decay"),
])
def test_a_frozen_parameter_with_a_gradient_or_moved_is_refused(case_and_result, mutate, message):
    case, result = case_and_result
    with pytest.raises(InvalidResult, match=message):
        validate_result("reference", case, mutate(result))


def test_the_dummy_image_of_a_text_only_micro_batch_changes_nothing(case_and_result):
    case, _ = case_and_result
    text_only = case.with_(samples=case.samples[:1] + case.samples[3:4], partition=Partition.all_in_one(2))
    assert not text_only.has_images
    model = load_model(case.model.checkpoint, torch.float64)
    (p,), = build_micro_batches(text_only, REFERENCE)
    (dummy,) = encode_micro_batch(model, [p])
    assert dummy is not None and dummy.abs().sum() > 0, "a text-only micro-batch still runs the tower"
    with torch.no_grad():
        plain = model(p.input_ids_BT, p.position_ids_BT, p.segment_ids_BT, "sdpa")
        with_dummy = model(p.input_ids_BT, p.position_ids_BT, p.segment_ids_BT, "sdpa", dummy, p.image_index_BT)
    assert torch.equal(plain, with_dummy)


def test_mrope_positions_stay_global_under_context_parallelism(case_and_result):
    case, _ = case_and_result
    whole = build_micro_batches(case, REFERENCE)[0][0]
    assert whole.position_ids_BT.shape[-1] == 3 and (whole.position_ids_BT[..., 1] != whole.position_ids_BT[..., 0]).any()
    cp2 = case.with_(parallel=ParallelPlan(cp=2, cp_style="ring"))
    for rank in range(2):
        shard = REFERENCE.shard(build_micro_batches(cp2, REFERENCE)[0][0], Mesh(dp=1, cp=2, rank=rank))
        assert torch.equal(shard.position_ids_BT, whole.position_ids_BT.tensor_split(2, dim=1)[rank])


def test_a_trainable_tower_is_declined_with_the_reason(case_and_result):
    case, _ = case_and_result
    trainable_tower = case.with_(model=dataclasses.replace(case.model, frozen=()))
    reason = resolve_engine("reference").unsupported_reason(trainable_tower)
    assert reason is not None and "frozen vision tower only" in reason
