"""The MoE load-balancing loss over the global batch (impls/reference/loss/router_aux.py), on a toy router by hand,
and the router reports' validation, serialisation and comparison (harness side).

Shapes: L sparse layers, N tokens, E experts, K experts per token.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from packcheck.harness.compare import Arms, compare_results, tolerance_for
from packcheck.harness.contract import UNPACKED, Case, Partition, Sample, StepResult
from packcheck.harness.engines.validate import InvalidResult, validate_result
from packcheck.harness.models import model_spec
from packcheck.impls.mutants.moe_router_counts_local import micro_batch_counts
from packcheck.impls.reference.loss.router_aux import RouterCounts, aux_loss_share, balance_counts, count_routes
from packcheck.impls.reference.model.moe import Routing

E, K = 3, 2

# Two layers' router logits of two micro-batches; the second micro-batch has two padding positions (last).
LOGITS = {
    "a": torch.tensor([[[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.1, 3.0]],
                       [[1.0, 1.0, 0.0], [-1.0, 2.0, 0.5], [0.3, 0.0, 0.2]]], dtype=torch.float64),
    "b": torch.tensor([[[0.0, 2.0, 1.0], [9.0, -9.0, 9.5], [5.0, 0.0, 0.0]],
                       [[0.0, 0.5, 1.0], [7.0, 7.5, -3.0], [0.0, 4.0, 0.0]]], dtype=torch.float64),
}
REAL = {"a": torch.tensor([True, True, True]), "b": torch.tensor([True, False, False])}


def routing(logits_LNE: torch.Tensor) -> list[Routing]:
    return [Routing(logits_NE, logits_NE.softmax(-1).topk(K, dim=-1).indices) for logits_NE in logits_LNE]


def hand_aux(logits_LNE_list: list[torch.Tensor], real_list: list[torch.Tensor]) -> float:
    """E * sum_e f_e P_e over the real tokens of every layer jointly, written out token by token."""
    tokens = [logits_NE[n] for logits_LNE, real in zip(logits_LNE_list, real_list) for logits_NE in logits_LNE
              for n in range(len(real)) if real[n]]
    f = [0.0] * E
    P = [0.0] * E
    for logits_E in tokens:
        probs = logits_E.softmax(-1)
        for e in probs.topk(K).indices.tolist():
            f[e] += 1 / len(tokens)
        for e in range(E):
            P[e] += probs[e].item() / len(tokens)
    return E * sum(f[e] * P[e] for e in range(E))


def counts(name: str) -> RouterCounts:
    return RouterCounts(count_routes(routing(LOGITS[name]), REAL[name], E), int(REAL[name].sum()))


def global_counts(*names: str) -> RouterCounts:
    return RouterCounts(sum(counts(n).tokens_per_expert_LE for n in names), sum(counts(n).real_tokens for n in names))


def test_count_routes_counts_real_tokens_only():
    got = count_routes(routing(LOGITS["b"]), REAL["b"], E)
    assert got.tolist() == [[0, 1, 1], [0, 1, 1]]  # the real token's top 2 in both layers: experts 1 and 2
    assert got.sum(1).tolist() == [K, K], "one real token, k assignments per layer; the padding routes nowhere"


def test_global_aux_is_the_sum_of_micro_batch_shares_and_equals_the_hand_definition():
    total = global_counts("a", "b")
    shares = [aux_loss_share(routing(LOGITS[n]), REAL[n], balance_counts(counts(n), total), total.real_tokens) for n in ("a", "b")]
    expected = hand_aux([LOGITS["a"], LOGITS["b"]], [REAL["a"], REAL["b"]])
    assert sum(shares).item() == pytest.approx(expected, rel=1e-14)


def test_aux_ignores_padding_so_padded_and_unpadded_layouts_agree():
    unpadded = LOGITS["b"][:, :1]
    alone = counts("b")
    share = aux_loss_share(routing(LOGITS["b"]), REAL["b"], alone, alone.real_tokens)
    trimmed = RouterCounts(count_routes(routing(unpadded), torch.tensor([True]), E), 1)
    assert share.item() == pytest.approx(aux_loss_share(routing(unpadded), torch.tensor([True]), trimmed, 1).item(), rel=1e-15)


def test_per_micro_batch_normalisation_differs_from_the_global_aux():
    """The mutant's step: each micro-batch's own f and P, token-weighted, is a different number for these micro-batches."""
    total = global_counts("a", "b")
    local = sum(aux_loss_share(routing(LOGITS[n]), REAL[n], micro_batch_counts(counts(n), total), total.real_tokens) for n in ("a", "b"))
    expected = hand_aux([LOGITS["a"], LOGITS["b"]], [REAL["a"], REAL["b"]])
    assert abs(local.item() - expected) > 1e-2 * expected
    one = counts("a")  # a single micro-batch: local is global
    assert aux_loss_share(routing(LOGITS["a"]), REAL["a"], micro_batch_counts(one, one), 3).item() == pytest.approx(
        hand_aux([LOGITS["a"]], [REAL["a"]]), rel=1e-14)


# --- the harness side: validation, save/load, comparison --------------------------------------------------------


@pytest.fixture(scope="module")
def moe_case_and_result():
    from packcheck.impls.reference.engine import ReferenceEngine

    samples = (Sample(input_ids=[1, 5, 9, 2, 7], loss_mask=[0, 1, 1, 1, 1]), Sample(input_ids=[3, 4, 8], loss_mask=[0, 0, 1]))
    case = Case(name="moe", model=model_spec("qwen3_moe"), samples=samples, layout=UNPACKED, dtype="float64",
                partition=Partition.single_rank([(0, 1)]))
    return case, ReferenceEngine().run(case)


def test_reference_reports_router_counts_that_sum_to_k_per_real_token(moe_case_and_result):
    case, result = moe_case_and_result
    assert result.router_tokens_per_expert.dtype == torch.int64
    assert result.router_tokens_per_expert.sum(1).tolist() == [2 * 8, 2 * 8]
    assert result.aux_loss > 0


def test_router_reports_round_trip_through_safetensors_and_json(moe_case_and_result, tmp_path):
    _, result = moe_case_and_result
    result.save(tmp_path)
    loaded = StepResult.load(tmp_path)
    assert loaded.aux_loss == result.aux_loss
    assert torch.equal(loaded.router_tokens_per_expert, result.router_tokens_per_expert)


@pytest.mark.parametrize(("change", "message"), [
    (lambda c: c + torch.tensor([[1, 0, 0, 0], [0, 0, 0, 0]]), r"row 0 sums to 17, expected 2 x 8 = 16: .*more: padding counted"),
    (lambda c: c.double(), "expected an integer tensor"),
    (lambda c: c[:, :3], r"shape \(2, 3\), expected \[sparse layers, 4\]"),
])
def test_invalid_router_counts_are_named(moe_case_and_result, change, message):
    case, result = moe_case_and_result
    bad = dataclasses.replace(result, router_tokens_per_expert=change(result.router_tokens_per_expert))
    with pytest.raises(InvalidResult, match=message):
        validate_result("e", case, bad)


def test_non_finite_aux_loss_is_named(moe_case_and_result):
    case, result = moe_case_and_result
    with pytest.raises(InvalidResult, match="result.aux_loss is nan"):
        validate_result("e", case, dataclasses.replace(result, aux_loss=float("nan")))


def test_router_counts_on_a_dense_family_are_refused(moe_case_and_result):
    case, result = moe_case_and_result
    dense = dataclasses.replace(case, model=model_spec("qwen3"))
    with pytest.raises(InvalidResult, match="has no experts"):
        validate_result("e", dense, dataclasses.replace(result, grads={}, router_tokens_per_expert=result.router_tokens_per_expert))


def test_compare_results_checks_router_reports_when_both_arms_report_them(moe_case_and_result):
    _, result = moe_case_and_result
    tol = tolerance_for("float64")
    moved = result.router_tokens_per_expert.clone()
    moved[1, 0] += 1
    moved[1, 1] -= 1
    other = dataclasses.replace(result, aux_loss=result.aux_loss * (1 + 1e-6), router_tokens_per_expert=moved)
    rows = {r.quantity: r for r in compare_results(Arms("a", "b"), other, result, tol, lambda i, t: "")}
    assert not rows["aux_loss"].passed and not rows["router_tokens_per_expert"].passed
    assert "layer 1 expert 0" in rows["router_tokens_per_expert"].where
    same = {r.quantity: r for r in compare_results(Arms("a", "b"), result, result, tol, lambda i, t: "")}
    assert same["aux_loss"].passed and same["router_tokens_per_expert"].passed
    dense = dataclasses.replace(result, aux_loss=None, router_tokens_per_expert=None)
    assert not {"aux_loss", "router_tokens_per_expert"} & {r.quantity for r in compare_results(Arms("a", "b"), dense, result, tol, lambda i, t: "")}


def test_low_precision_allows_a_near_tie_to_flip_but_not_a_routing_bug(moe_case_and_result):
    _, result = moe_case_and_result
    tokens_LE = result.router_tokens_per_expert * 30  # a batch the size of the golden case's (~450 assignments)
    result = dataclasses.replace(result, router_tokens_per_expert=tokens_LE)
    one_flip = tokens_LE.clone()
    one_flip[0, 0] += 1
    one_flip[0, 1] -= 1
    many = tokens_LE.clone()
    many[:, 0] += tokens_LE[:, 1] // 2  # half of an expert's tokens go elsewhere: not a rounding tie
    many[:, 1] -= tokens_LE[:, 1] // 2

    def passed(moved, dtype):
        rows = compare_results(Arms("a", "b"), dataclasses.replace(result, router_tokens_per_expert=moved), result,
                               tolerance_for(dtype), lambda i, t: "")
        return next(r for r in rows if r.quantity == "router_tokens_per_expert").passed

    assert passed(one_flip, "bfloat16") and not passed(one_flip, "float64")
    assert not passed(many, "bfloat16")
