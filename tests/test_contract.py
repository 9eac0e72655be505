"""The contract refuses malformed input with a message that names the field and the fix, and
round-trips through JSON / safetensors without loss."""

from __future__ import annotations

import pytest
import torch

from packcheck.harness.contract import UNPACKED, Case, ContractError, Layout, LayoutKind, ParallelPlan, Partition, Sample, StepResult, packed
from packcheck.harness.models import model_spec


@pytest.fixture(scope="module")
def model():
    return model_spec("llama")


def case(model, samples, layout=UNPACKED, partition=None, **fields):
    return Case(name="t", model=model, samples=samples, layout=layout, partition=partition or Partition.all_in_one(len(samples)), **fields)


GOOD = Sample(input_ids=[1, 2, 3], loss_mask=[0, 1, 1])


@pytest.mark.parametrize(("sample", "message"), [
    (Sample(input_ids=[1, 2], loss_mask=[1, 1]), r"samples\[0\].loss_mask\[0\] = 1.*set loss_mask\[0\] = 0"),
    (Sample(input_ids=[1, 2, 3], loss_mask=[0, 1]), r"loss_mask has 2 entries but input_ids has 3"),
    (Sample(input_ids=[], loss_mask=[]), r"input_ids is empty"),
    (Sample(input_ids=[1, 999], loss_mask=[0, 1]), r"outside the vocabulary \[0, 128\)"),
    (Sample(input_ids=[1, 2], loss_mask=[0, 2]), r"only 0 and 1"),
])
def test_malformed_samples_name_the_field(model, sample, message):
    with pytest.raises(ContractError, match=message):
        case(model, [sample])


def test_packing_never_truncates(model):
    long = Sample(input_ids=list(range(10)), loss_mask=[0] + [1] * 9)
    with pytest.raises(ContractError, match=r"samples \[0\] are longer than layout.seq_len=8.*never truncates"):
        case(model, [long], packed(8))


@pytest.mark.parametrize(("partition", "message"), [
    (Partition.single_rank([(0,)]), r"missing \[1\]"),
    (Partition.single_rank([(0, 1), (1,)]), r"repeated \[1\]"),
    (Partition.single_rank([(0, 1), ()]), r"empty micro-batch"),
    (Partition(per_rank=(((0,),), ((1,),))), r"2 ranks but parallel.dp is 1"),
])
def test_partition_must_use_every_sample_once(model, partition, message):
    with pytest.raises(ContractError, match=message):
        case(model, [GOOD, GOOD], partition=partition)


def test_uneven_micro_steps_across_ranks_are_refused(model):
    partition = Partition(per_rank=(((0,), (1,)), ((2,),)))
    with pytest.raises(ContractError, match=r"every rank needs the same number"):
        case(model, [GOOD] * 3, partition=partition, parallel=ParallelPlan(dp=2))


def test_a_batch_without_targets_is_refused(model):
    with pytest.raises(ContractError, match="the loss is undefined"):
        case(model, [Sample(input_ids=[1, 2], loss_mask=[0, 0])])


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(kind="packed"), "seq_len must be a positive int"),
    (dict(kind="unpacked", seq_len=8), "only meaningful for packed"),
    (dict(kind="unpacked", padding_side="middle"), "use 'left' or 'right'"),
    (dict(kind="rolled"), "'rolled' is not a valid LayoutKind"),
])
def test_layout_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Layout(**kwargs)


def test_cp_style_required_with_cp():
    with pytest.raises(ContractError, match="choose one of"):
        ParallelPlan(cp=2)


def test_case_round_trips_through_json(model):
    original = case(model, [GOOD, Sample(input_ids=[4, 5], loss_mask=[0, 1])], Layout(kind=LayoutKind.STACKED, padding_side="left"))
    again = Case.from_json(original.to_json())
    assert again == original
    assert again.digest() == original.digest()
    assert original.with_(dtype="float32").digest() != original.digest()


def test_supervised_set_and_count(model):
    c = case(model, [GOOD, Sample(input_ids=[4, 5, 6, 7], loss_mask=[0, 0, 1, 0])])
    assert c.supervised == {(0, 1), (0, 2), (1, 2)}
    assert c.num_loss_tokens == 3


def test_step_result_round_trips_without_pickle(tmp_path):
    result = StepResult(
        logprobs=[torch.tensor([0.0, -1.5]), torch.tensor([0.0])],
        loss=1.25, num_loss_tokens=1,
        grads={"a.weight": torch.randn(2, 3, dtype=torch.float64)},
        dloss_dlogprobs=[torch.tensor([0.0, -1.0]), torch.tensor([0.0])],
        params_after={"a.weight": torch.ones(2, 3)},
        notes={"engine": "<b>x</b>"},
    )
    result.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json", "result.safetensors"]
    again = StepResult.load(tmp_path)
    assert again.loss == 1.25 and again.num_loss_tokens == 1 and again.notes == result.notes
    assert all(torch.equal(a, b) for a, b in zip(again.logprobs, result.logprobs))
    assert torch.equal(again.grads["a.weight"], result.grads["a.weight"])
    assert torch.equal(again.params_after["a.weight"], result.params_after["a.weight"])
