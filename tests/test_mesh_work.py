"""Mesh use proven by work: what each rank of a distributed arm embedded must be its share of the batch.

An engine whose ranks compute everything alone and issue the collectives a mesh would need (empty
all_reduces), or that runs context parallelism as data parallelism, returns the single-process
numbers and satisfies the collective trace; the token meters (harness/launch/token_meter.py,
harness/run/work_share.py) do not. The reference's own distributed arms are the positive control
(test_scenarios.py runs every scenario against it, and this file runs dp_cp_reduction's arms), with its vocabulary
table padded too (tests/engines/padded_vocabulary.py). What the meters cannot prove is here too: an engine that writes
its own meter's counts is believed (docs/isolation.md).
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from packcheck.harness.contract import ParallelPlan
from packcheck.harness.launch.token_meter import MAX_PADDING, TokenMeter
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.scenario_runner import RunOptions, run_scenario
from packcheck.harness.run.work_share import overworked, unobservable
from packcheck.harness.scenarios import SCENARIOS
from tests.engines.hostile import ForgesTokenMeter, IgnoresMeshQuietly, RunsCpAsDp
from tests.engines.padded_vocabulary import PadsVocabulary, PadsVocabularyIgnoresMesh
from tests.machine_load import stretched

VOCAB, HIDDEN = 128, 64  # the tiny families' (harness/models/families.py)


def spec(engine) -> str:
    return f"{engine.__module__}:{engine.__name__}"


def meter(ids) -> dict:
    counts = Counter(ids)
    return {"lookups": 1 if counts else 0, "ids": {str(k): v for k, v in counts.items()}}


@pytest.fixture(scope="module")
def meshes() -> dict:
    """dp_cp_reduction's cases: a dp1 x cp2 arm and a dp2 x cp1 arm with uneven shares."""
    return SCENARIOS["dp_cp_reduction"].build(Inputs().setting("llama", "float64", "cpu"))


@pytest.fixture
def tiny_case_cp2(meshes):
    return meshes["dp1_cp2_ulysses"]


@pytest.fixture
def tiny_case_dp2(meshes):
    return meshes["dp2_cp1_uneven"]


def test_shards_that_cover_the_row_once_pass_and_whole_rows_do_not(tiny_case_cp2):
    case = tiny_case_cp2
    tokens = [t for s in case.samples for t in s.input_ids]
    half = len(tokens) // 2
    assert overworked(case, [meter(tokens[:half]), meter(tokens[half:] + [0] * 7)]) == []  # pads cost nothing
    whole = overworked(case, [meter(tokens), meter(tokens)])
    assert len(whole) == 1 and "each rank ran the rows whole" in whole[0], whole
    idle = overworked(case, [meter(tokens), meter([])])
    assert any("rank 1 embedded no token" in p for p in idle), idle


def test_a_data_parallel_rank_that_computes_the_others_micro_batches_is_named(tiny_case_dp2):
    case = tiny_case_dp2
    shares = [[t for mb in rank for i in mb for t in case.samples[i].input_ids] for rank in case.partition.per_rank]
    assert overworked(case, [meter(shares[0]), meter(shares[1])]) == []
    everything = shares[0] + shares[1]
    problems = overworked(case, [meter(everything), meter(everything)])
    assert len(problems) == 2 and all("computed the other data-parallel ranks' micro-batches" in p for p in problems), problems


def test_tensor_and_pipeline_ranks_are_judged_where_the_embedding_runs(tiny_case_dp2):
    """dp2 x tp2: every tensor-parallel rank embeds its data-parallel rank's share (rank = dp x tp + tp); pp2 x dp2: the
    first stage's ranks (0, 1) embed, the last stage's (2, 3) embed nothing, rightly."""
    shares = [[t for mb in rank for i in mb for t in tiny_case_dp2.samples[i].input_ids]
              for rank in tiny_case_dp2.partition.per_rank]
    tp2 = tiny_case_dp2.with_(parallel=ParallelPlan(dp=2, tp=2))
    assert overworked(tp2, [meter(shares[0]), meter(shares[0]), meter(shares[1]), meter(shares[1])]) == []
    idle = overworked(tp2, [meter(shares[0]), meter([]), meter(shares[1]), meter(shares[1])])
    assert len(idle) == 1 and "rank 1 embedded no token" in idle[0], idle
    pp2 = tiny_case_dp2.with_(parallel=ParallelPlan(dp=2, pp=2))
    assert overworked(pp2, [meter(shares[0]), meter(shares[1]), meter([]), meter([])]) == []
    everything = shares[0] + shares[1]
    assert len(overworked(pp2, [meter(everything), meter(everything), meter([]), meter([])])) == 2


def test_no_lookup_seen_on_any_rank_is_said_not_judged(tiny_case_cp2):
    nothing = [meter([]), meter([])]
    assert overworked(tiny_case_cp2, nothing) == []
    assert "not observable" in unobservable(tiny_case_cp2, nothing)
    assert unobservable(tiny_case_cp2, [meter([1]), meter([2])]) is None


def metered(table, ids, hidden=HIDDEN) -> dict:
    with TokenMeter(VOCAB, hidden) as meter:
        torch.nn.functional.embedding(ids, table)
    return meter.counts


def test_a_padded_vocabulary_table_is_metered_and_position_tables_are_not():
    ids = torch.tensor([[3, 5, 5, 127]])
    assert metered(torch.zeros(VOCAB, HIDDEN), ids) == {3: 1, 5: 2, 127: 1}
    assert metered(torch.zeros(256, HIDDEN), ids) == {3: 1, 5: 2, 127: 1}, "Megatron's padding: 128 x tp 2"
    assert metered(torch.zeros(VOCAB + MAX_PADDING - 1, HIDDEN), ids) != {}
    positions = torch.arange(48)[None]
    assert metered(torch.zeros(512, 16), positions) == {}, "a RoPE cache (max positions x head_dim) is narrower than the hidden size"
    assert metered(torch.zeros(VOCAB + MAX_PADDING, HIDDEN), ids) == {}, "more rows than any padding adds"
    assert metered(torch.zeros(256, HIDDEN), torch.tensor([3, 200])) == {}, "an id past the vocabulary is no token"
    assert metered(torch.zeros(256, HIDDEN), ids, hidden=None) == {}, "no width given: only vocab_size rows count"


def test_a_padded_vocabulary_engine_is_judged_by_its_work():
    verdict = run_scenario(spec(PadsVocabulary), SCENARIOS["dp_cp_reduction"], "llama", options=RunOptions(timeout=stretched(120)))
    assert verdict.status == "pass", verdict.message()
    assert "not observable" not in verdict.message(), verdict.message()


@pytest.mark.parametrize("engine", [IgnoresMeshQuietly, RunsCpAsDp, PadsVocabularyIgnoresMesh], ids=lambda e: e.name)
def test_an_engine_that_talks_but_computes_alone_fails_on_its_work(engine):
    verdict = run_scenario(spec(engine), SCENARIOS["dp_cp_reduction"], "llama", options=RunOptions(timeout=stretched(120)))
    assert verdict.status == "fail", verdict.message()
    assert "did not run the arm on its mesh" in verdict.diagnosis
    mesh = [c for c in verdict.comparisons if c.quantity == "mesh"]
    assert mesh and ("ran the rows whole" in mesh[0].where or "other data-parallel ranks' micro-batches" in mesh[0].where), mesh
    assert "collective" not in mesh[0].where, "the trace was satisfied: the work is what tells"


@pytest.mark.slow
@pytest.mark.parametrize(("engine", "scenario"), [(IgnoresMeshQuietly, "cp_vs_nocp"), (RunsCpAsDp, "cp_vs_nocp"),
                                                  (IgnoresMeshQuietly, "microbatch_invariance")], ids=str)
def test_at_another_seed_too(engine, scenario):
    verdict = run_scenario(spec(engine), SCENARIOS[scenario], "llama",
                           options=RunOptions(timeout=stretched(120), inputs=Inputs(seed=3)))
    assert verdict.status == "fail" and "did not run the arm on its mesh" in verdict.diagnosis, verdict.message()


def test_a_meter_forged_in_the_engines_own_process_is_believed():
    """The limit of what the meters prove, pinned: ForgesTokenMeter is IgnoresMeshQuietly (failed above on its work) that
    writes its share's counts into its own rank's meter, and nothing the harness reads from that process can tell. When
    work is proven from outside the engine's process, this test is to fail and become a check that it is caught."""
    verdict = run_scenario(spec(ForgesTokenMeter), SCENARIOS["dp_cp_reduction"], "llama", options=RunOptions(timeout=stretched(120)))
    assert verdict.status == "pass", verdict.message()
    assert "not observable" not in verdict.message(), "the forged meters were read as the work, not set aside"
