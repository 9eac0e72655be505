"""Adapter tests for ringmaster_cp: the translation into ringmaster's inputs, the declared limits,
and that both pinned findings are exactly what they claim (real ringmaster, real HF model, real
gloo ranks through the harness launcher; nothing mocked).

The two scenario tests launch 2- and 4-rank groups (about a minute each on two busy cores).
"""

from __future__ import annotations

import pytest
import torch
from packcheck.harness.contract import UNPACKED, Layout, LayoutKind, ParallelPlan, packed
from packcheck.harness.data.samples import CP_CUTS, CP_CUTS_SEQ_LEN, MIXED_DOCUMENTS
from packcheck.harness.engines import UnsupportedCase, resolve_engine
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.run.scenario_runner import run_scenario, setting_for
from packcheck.harness.scenarios import SCENARIOS
from packcheck.impls.adapters.ringmaster_cp.engine import RingmasterCP
from packcheck.impls.adapters.ringmaster_cp.preshifted_labels import PreshiftedLabels
from packcheck.impls.adapters.ringmaster_cp.rows import IGNORE, build_forwards

LAYOUTS = {
    "packed": packed(48),
    "unpacked-right": UNPACKED,
    "unpacked-left": Layout(kind=LayoutKind.UNPACKED, padding_side="left"),
    "stacked": Layout(kind=LayoutKind.STACKED, bucket_width=8),
}


def case_for(layout, family="llama", samples_spec=MIXED_DOCUMENTS, **fields):
    setting = setting_for(family, "float64", "cpu")
    return arm(setting, "probe", samples_for(setting, samples_spec), layout, **fields)


def cp_rows(engine, forward, cp):
    """Every cp rank's shard of one forward, concatenated back along the sequence."""
    shards = [engine.shard(forward, rank, cp) for rank in range(cp)]
    return {key: torch.cat([s[key] for s in shards], dim=1) for key in ("input_ids", "shift_labels", "target_ids", "dest")}


def test_both_engines_are_registered():
    assert isinstance(resolve_engine("ringmaster_cp"), RingmasterCP)
    assert type(resolve_engine("ringmaster_cp.preshifted-labels")) is PreshiftedLabels


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
def test_rows_carry_every_sample_token_once_and_restart_positions_per_segment(layout):
    case = case_for(LAYOUTS[layout])
    flat = torch.cat([torch.tensor(s.input_ids) for s in case.samples])
    seen = torch.zeros(len(flat) + 1, dtype=torch.long)
    for forward in build_forwards(case, case.partition.per_rank[0][0]):
        hit = forward.dest_BT > 0
        assert torch.equal(flat[forward.dest_BT[hit] - 1], forward.target_ids_BT[hit])  # position t predicts its token t+1
        seen.index_add_(0, forward.dest_BT.reshape(-1), torch.ones(forward.dest_BT.numel(), dtype=torch.long))
        for row_pos, row_ids, row_labels in zip(forward.position_ids_BT, forward.input_ids_BT, forward.labels_BT):
            starts = (row_pos == 0).nonzero().flatten().tolist()
            assert starts[0] == 0 and all(row_pos[i] == row_pos[i - 1] + 1 for i in range(1, len(row_pos)) if i not in starts)
            in_loss = row_labels != IGNORE
            assert torch.equal(row_labels[in_loss], row_ids[in_loss])  # HF labels: unshifted
    offsets = torch.tensor([0] + [len(s.input_ids) for s in case.samples]).cumsum(0)[:-1]
    expected = torch.ones(len(flat), dtype=torch.long)
    expected[offsets] = 0  # token 0 of a sample is predicted by nothing in it
    assert torch.equal(seen[1:], expected)


@pytest.mark.parametrize("cp", [2, 4])
def test_sharded_labels_are_the_unshifted_labels_shifted_once(cp):
    engine = RingmasterCP()
    case = case_for(packed(CP_CUTS_SEQ_LEN), samples_spec=CP_CUTS)
    for forward in build_forwards(case, case.partition.per_rank[0][0]):
        rows = cp_rows(engine, forward, cp)
        T = forward.input_ids_BT.shape[1]
        assert torch.equal(rows["input_ids"][:, :T], forward.input_ids_BT)
        expected = torch.full_like(forward.labels_BT, IGNORE)
        expected[:, :-1] = forward.labels_BT[:, 1:]
        assert torch.equal(rows["shift_labels"][:, :T], expected)
        assert (rows["shift_labels"][:, T:] == IGNORE).all()  # ringmaster's shard padding is out of the loss
        in_loss = rows["shift_labels"] != IGNORE
        assert torch.equal(rows["shift_labels"][in_loss], rows["target_ids"][in_loss])


def test_preshifted_variant_hands_shard_batch_labels_it_shifts_a_second_time():
    case = case_for(packed(CP_CUTS_SEQ_LEN), samples_spec=CP_CUTS)
    forward = build_forwards(case, case.partition.per_rank[0][0])[0]
    rows = cp_rows(PreshiftedLabels(), forward, 2)
    T = forward.labels_BT.shape[1]
    twice = torch.full_like(forward.labels_BT, IGNORE)
    twice[:, :-2] = forward.labels_BT[:, 2:]
    assert torch.equal(rows["shift_labels"][:, :T], twice)
    single = PreshiftedLabels().shard(forward, 0, 1)  # without CP the caller's shifted labels are right
    assert torch.equal(single["shift_labels"], RingmasterCP().shard(forward, 0, 1)["shift_labels"])


def test_declared_limits_are_refused_loudly():
    engine = RingmasterCP()
    ulysses4 = case_for(packed(CP_CUTS_SEQ_LEN), samples_spec=CP_CUTS, parallel=ParallelPlan(cp=4, cp_style="ulysses"))
    assert "key/value heads" in engine.unsupported_reason(ulysses4)
    one_document_rows = case_for(UNPACKED, samples_spec=((12, "all"), (12, "all")), parallel=ParallelPlan(cp=2, cp_style="ring"))
    assert "dense path" in engine.unsupported_reason(one_document_rows)
    assert engine.unsupported_reason(one_document_rows.with_(parallel=ParallelPlan(cp=2, cp_style="ulysses"))) is None
    for case in (ulysses4, one_document_rows, case_for(packed(48)).with_(dtype="float32")):
        with pytest.raises(UnsupportedCase):
            engine.run(case)


def worst_by_quantity(verdict):
    worst = {}
    for c in verdict.comparisons:
        worst.setdefault((c.arms, c.quantity), []).append(c)
    return worst


def test_cp_deviations_are_exactly_the_rounded_count():
    """The pinned cp_vs_nocp finding is the whole story: every cp arm's log-probs equal the single
    run's, its count is cp * round(N / cp), and its loss and every gradient are off by exactly
    N / count - 1; nothing else moves (ring and Ulysses attention themselves are exact)."""
    scenario = SCENARIOS["cp_vs_nocp"]
    cases = scenario.build(setting_for("llama", "float64", "cpu"))
    verdict = run_scenario(RingmasterCP(), scenario, "llama")
    assert verdict.known_finding, verdict.message()
    single = None
    cp_arms = 0
    for (arms, quantity), rows in worst_by_quantity(verdict).items():
        cp = cases[arms.arm.name].parallel.cp
        if quantity == "logprobs":
            assert all(r.passed for r in rows), rows
        if quantity == "num_loss_tokens":
            cp_arms += 1
            (row,) = rows
            engine_count, single = (int(x) for x in row.where.split(" vs "))
            assert engine_count == cp * round(single / cp)
            scale = abs(single / engine_count - 1)
            assert scale > 0
            for r in worst_by_quantity(verdict)[(arms, "grad")] + worst_by_quantity(verdict)[(arms, "loss")]:
                # float32 casts inside the HF RMSNorm backward round the 1/76-scaled gradient differently: ~5e-7 relative
                assert r.observed == pytest.approx(scale, rel=1e-5), (r.item, r.metric, r.observed, scale)
    assert cp_arms == 6  # cp2 and cp4 ring, cp2 ulysses, both unpacked cp2 arms, cp4 ring at seq 50


def test_preshifted_labels_finding_is_far_beyond_the_rounding():
    verdict = run_scenario(PreshiftedLabels(), SCENARIOS["cp_vs_nocp"], "llama")
    assert verdict.known_finding and "shifted again" in verdict.known_finding, verdict.message()
    grads = [c for c in verdict.comparisons if c.quantity == "grad" and c.metric == "max_rel"]
    assert max(c.observed for c in grads) > 0.5  # the rounding alone moves gradients by 1.3e-2
    assert all(c.passed for c in verdict.comparisons if c.quantity == "logprobs")
