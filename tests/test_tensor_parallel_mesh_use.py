"""A tp > 1 arm is judged on its mesh: each rank must exchange with its tensor-parallel peers at least once per
attention layer (harness/collectives/mesh_use.py), and the token meters read each data-parallel rank's work off the
contract's rank layout, tp fastest (harness/run/work_share.py). On synthetic logs and meters: no launch."""

from __future__ import annotations

from collections import Counter

from packcheck.harness.collectives import unused_mesh
from packcheck.harness.contract import ParallelPlan
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.work_share import overworked
from packcheck.harness.scenarios import SCENARIOS

LAYERS = 2
DP2_TP2 = ParallelPlan(dp=2, tp=2)  # ranks 0, 1: dp 0 (tp 0, 1); ranks 2, 3: dp 1


def reduce_over(*ranks: int) -> dict:
    return {"op": "all_reduce", "group": list(ranks)}


def test_ranks_that_reduce_over_their_tp_group_each_layer_ran_tensor_parallel():
    logs = [[reduce_over(r - r % 2, r - r % 2 + 1)] * LAYERS + [reduce_over(r % 2, r % 2 + 2)] for r in range(4)]
    assert unused_mesh(DP2_TP2, LAYERS, logs) == []


def test_ranks_that_only_reduce_over_data_parallel_did_not_run_tensor_parallel():
    logs = [[reduce_over(r % 2, r % 2 + 2)] * 5 for r in range(4)]  # every rank whole: gradients summed over dp only
    problems = unused_mesh(DP2_TP2, LAYERS, logs)
    assert len(problems) == 4 and all("did not run tensor-parallel" in p for p in problems), problems


def test_fewer_tp_exchanges_than_attention_layers_is_flagged():
    logs = [[reduce_over(0, 1)], [reduce_over(0, 1)]]  # one reduction (the loss?), not one per layer
    assert len(unused_mesh(ParallelPlan(tp=2), LAYERS, logs)) == 2


def test_each_tp_rank_embedding_its_data_parallel_share_is_not_overworked():
    case = SCENARIOS["tp_vs_notp"].build(Inputs().setting("llama", "float64", "cpu"))["dp2_tp2"]
    shares = [Counter(t for micro_batch in rank for i in micro_batch for t in case.samples[i].input_ids)
              for rank in case.partition.per_rank]
    meters = [{"lookups": 1, "ids": {str(k): v for k, v in shares[rank // 2].items()}} for rank in range(4)]
    assert overworked(case, meters) == []
    whole_batch = {"lookups": 1, "ids": {str(k): v for k, v in sum(shares, Counter()).items()}}
    assert overworked(case, [whole_batch] * 4), "every rank embedding the whole batch ignored the data-parallel split"
