"""Every --seed builds valid cases: for each family and scenario, the arms of seeds 0-19 pass the contract's own
check. A perturbed document of random tokens once hit the VLM's image placeholder id (linear_attention_reset,
qwen2_5_vl, seed 1, found by `packcheck calibrate` on an H200), a case the contract rejects, which ended the run."""

from __future__ import annotations

import dataclasses

import pytest

from packcheck.harness.engines import resolve_engine
from packcheck.harness.models import FAMILIES
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.scenarios import SCENARIOS

SEEDS = range(20)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_seed_builds_cases_the_contract_accepts(family):
    checked = 0
    # the seed's cases over seed 0's checkpoint: its weights are no part of what the contract checks, and each seed's own
    # checkpoint cost a build (100 of them, 80 s of the CI budget); the seed's documents, micro-batches and images are these
    model_of_seed_0 = Inputs(seed=0).setting(family, "float64", "cpu")
    for seed in SEEDS:
        setting = dataclasses.replace(model_of_seed_0, seed=seed)
        for scenario in SCENARIOS.values():
            if scenario.applies(setting, resolve_engine("reference").capabilities):
                continue
            for case in scenario.build(setting).values():
                case.check()
                checked += 1
    assert checked >= len(SEEDS) * 10, f"only {checked} cases were built: the loop checked almost nothing"


def shape_of(lengths, seq_len):
    """What scenarios need of a packing: which documents share a row, each row's tokens, the length-1 to 3 documents,
    and for each document the quarter (cp shard) it starts in, whether it starts on a quarter mark, and which marks it crosses."""
    from packcheck.harness.contract.rows import pack_in_order

    quarter, shape = seq_len // 4, []
    for row in pack_in_order(lengths, seq_len):
        offset = 0
        for i in row:
            end = offset + lengths[i]
            shape.append((tuple(row), offset // quarter, offset % quarter == 0, tuple(range(-(-offset // quarter) * quarter, end, quarter)),
                          lengths[i] if lengths[i] < 4 else None))
            offset = end
        shape.append(sum(lengths[i] for i in row))
    return shape


def test_a_seed_varies_document_lengths_and_keeps_what_scenarios_need():
    """--seed once varied tokens, weights and masks but never a length: an engine keyed on the default lengths passed
    at every seed. Now the lengths move, inside what each sample set is there to test."""
    from packcheck.harness.data.lengths import varied
    from packcheck.harness.data.samples import PACKED_AT, scaled

    for spec, seq_len in PACKED_AT.items():
        lengths = [n for n, _ in spec]
        moved = 0
        for seed in range(1, 40):
            other = varied(spec, seq_len, seed)
            assert [k for _, k in other] == [k for _, k in spec]
            assert shape_of([n for n, _ in other], seq_len) == shape_of(lengths, seq_len), (seq_len, seed, other)
            assert shape_of([n for n, _ in scaled(other, 3)], 3 * seq_len)[-1] == shape_of([n for n, _ in scaled(spec, 3)], 3 * seq_len)[-1]
            moved += [n for n, _ in other] != lengths
        assert moved >= 20, f"{spec}: only {moved} of 39 seeds moved a length"
        assert varied(spec, seq_len, 0) == spec
    base, other = Inputs(seed=0).setting("llama", "float64", "cpu"), Inputs(seed=7).setting("llama", "float64", "cpu")
    for name in ("packed_vs_unpacked", "cp_vs_nocp", "microbatch_invariance", "token_conservation", "mask_alignment"):
        before, after = SCENARIOS[name].build(base), SCENARIOS[name].build(other)
        arm = next(iter(before))
        assert [len(s.input_ids) for s in after[arm].samples] != [len(s.input_ids) for s in before[arm].samples], name


def test_a_seed_varies_the_shuffled_micro_batches():
    """microbatch_invariance's shuffled partition was the same at every seed: an engine could key on it."""
    base = SCENARIOS["microbatch_invariance"].build(Inputs(seed=0).setting("llama", "float64", "cpu"))["shuffled"].partition
    seen = set()
    for seed in range(1, 10):
        case = SCENARIOS["microbatch_invariance"].build(Inputs(seed=seed).setting("llama", "float64", "cpu"))["shuffled"]
        case.check()
        partition = case.partition
        assert sorted(i for mb in partition.micro_batches for i in mb) == list(range(len(case.samples)))
        assert len(partition.micro_batches) == len(base.micro_batches)
        seen.add(partition.per_rank)
    assert base.per_rank not in seen or len(seen) > 1
    assert len(seen) >= 5, f"only {len(seen)} partitions over 9 seeds"
