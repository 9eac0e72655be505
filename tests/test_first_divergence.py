"""First divergence: a failing verdict's two arms re-run with activation capture name the right place.

Real runs, in the engines' own processes: the reference's arms agree at every captured point (the positive control);
cross-document attention and positions that are not reset part first inside layer 0's attention (between its q/k/v
projections and o_proj: RoPE and the attention core); the linear-attention state leak inside layer 0's GatedDeltaNet
(qwen3_5's first linear-attention layer); a label across a packed boundary and a constant micro-batch loss scale part
in no module's forward, only in the gradient the loss sends into the model's output. An engine without the capture
hook is told why, in a sentence.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from packcheck.harness.compare import ArmId
from packcheck.harness.compare.bound import RULE
from packcheck.harness.compare.divergence import Where, first_divergence
from packcheck.harness.contract.activations import Activations, Point, PointKind
from packcheck.harness.launch import LaunchPool
from packcheck.harness.run.localise import localise, localise_verdict
from packcheck.harness.run.scenario_runner import RunOptions, run_scenario, setting_for
from packcheck.harness.scenarios import get_scenario
from tests.machine_load import load_note, stretched

ATTENTION_0 = "model.layers.0.self_attn"


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with LaunchPool(tmp_path_factory.mktemp("launches"), timeout=300.0) as launches:
        yield launches


def located(pool, engine: str, family: str, scenario: str):
    """The engine's verdict on the scenario (it must fail), then where its arms part."""
    info, plan = pool.engine_info(engine, "cpu"), get_scenario(scenario)
    verdict = run_scenario(info, plan, family, options=RunOptions(pool=pool))
    assert verdict.status == "fail", verdict.message()
    return localise_verdict(info, plan, setting_for(family, "float64", "cpu"), verdict.comparisons, pool)


def test_reference_arms_agree_at_every_point(pool):
    """Positive control: the reference's packed and unpacked arms, captured, agree forward and backward."""
    found = localise(pool.engine_info("reference", "cpu"), get_scenario("packed_vs_unpacked"), setting_for("llama", "float64", "cpu"),
                     ArmId("packed"), ArmId("unpacked"), pool)
    assert found.where is Where.NOWHERE, found.sentence()
    assert len(found.forward) > 20 and len(found.backward) > 20 and found.tokens > 100
    assert max(p.error for p in (*found.forward, *found.backward)) < 1e-12


def test_cross_doc_attention_parts_in_layer_0_attention(pool):
    found = located(pool, "mutant.cross-doc-attention", "llama", "packed_vs_unpacked")
    assert found.where is Where.FORWARD, found.sentence()
    first = found.first_point
    assert first.module == ATTENTION_0 and first.label == f"{ATTENTION_0}.o_proj (input)"
    assert all(p.error == 0 for p in found.forward[:found.first])  # the embedding, the norm, q/k/v: exact
    assert first.error > 1e-2 and found.seconds < stretched(60), (found.seconds, load_note())


def test_cross_doc_attention_on_document_isolation_parts_in_layer_0_attention(pool):
    """document_isolation replaces documents on purpose: only the documents it keeps are compared, so the embedding
    of a replaced document (which differs by construction) is not taken for the bug."""
    found = located(pool, "mutant.cross-doc-attention", "llama", "document_isolation")
    assert found.where is Where.FORWARD and found.first_point.module == ATTENTION_0, found.sentence()
    kept = get_scenario("document_isolation").kept_samples(setting_for("llama", "float64", "cpu"))
    assert found.first_point.worst_sample in kept


@pytest.mark.slow
def test_linear_attention_state_leak_on_linear_attention_reset_parts_in_the_first_linear_attention_layer(pool):
    """linear_attention_reset replaces its A documents on purpose, as document_isolation does: its B documents decide
    (compared on every document, its cp2_ring_other_tokens arm named model.embed_tokens)."""
    found = located(pool, "mutant.linear-attn-state-leak", "qwen3_5", "linear_attention_reset")
    assert found.where is Where.FORWARD and found.first_point.module == "model.layers.0.linear_attn", (found.arm, found.sentence())


@pytest.mark.slow
def test_positions_not_reset_parts_in_layer_0_attention(pool):
    found = located(pool, "mutant.positions-not-reset", "llama", "packed_vs_unpacked")
    assert found.where is Where.FORWARD and found.first_point.module == ATTENTION_0, found.sentence()


@pytest.mark.slow
def test_linear_attention_state_leak_parts_in_the_first_linear_attention_layer(pool):
    found = located(pool, "mutant.linear-attn-state-leak", "qwen3_5", "packed_vs_unpacked")
    assert found.where is Where.FORWARD and found.first_point.module == "model.layers.0.linear_attn", found.sentence()


@pytest.mark.parametrize("engine, scenario", [
    ("mutant.boundary-label", "packed_vs_unpacked"),
    pytest.param("mutant.const-microbatch-scale", "microbatch_invariance", marks=pytest.mark.slow),
])
def test_loss_side_bugs_part_in_no_module_forward(pool, engine, scenario):
    found = located(pool, engine, "llama", scenario)
    assert found.where is Where.LOSS, found.sentence()
    assert max(p.error for p in found.forward) < 1e-12  # the same model on other rows: rounding at most
    assert found.first == 0 and found.backward[0].label == "lm_head"
    assert "no module diverges in the forward; the loss does" in found.sentence()


def test_an_engine_without_the_hook_is_told_why(pool):
    found = localise(pool.engine_info("packcheck.impls.example.minimal_engine:MinimalEngine", "cpu"), get_scenario("packed_vs_unpacked"),
                     setting_for("llama", "float64", "cpu"), ArmId("packed"), ArmId("unpacked"), pool)
    assert found.where is Where.UNAVAILABLE
    assert "Capabilities(activations=True)" in found.sentence() and "active_recorder" in found.sentence()


def captured(forward: dict[str, list[float]], backward: dict[str, list[float]], seen: list[float]) -> Activations:
    """Activations of two samples of two tokens, one direction: rows in sample order."""
    points = [Point(label, PointKind.OUTPUT, label) for label in forward]
    column = lambda values: torch.tensor(values, dtype=torch.float64)[:, None]  # noqa: E731
    return Activations(lengths=[2, 2], dims=1, points=points, forward={k: column(v) for k, v in forward.items()},
                       backward={k: column(v) for k, v in backward.items()}, backward_order=list(backward),
                       seen=torch.tensor(seen, dtype=torch.float64))


def test_a_backward_only_bug_names_the_first_module_in_backward_order():
    same = {"embed": [1.0, 2.0, 3.0, 4.0], "attn": [1.0, 1.0, 1.0, 1.0], "head": [2.0, 2.0, 2.0, 2.0]}
    a = captured(same, {"head": [1.0, 1.0, 1.0, 1.0], "attn": [5.0, 1.0, 1.0, 1.0]}, [1, 1, 1, 1])
    b = captured(same, {"head": [1.0, 1.0, 1.0, 1.0], "attn": [1.0, 1.0, 1.0, 1.0]}, [1, 1, 1, 1])
    found = first_divergence("a", a, "b", b, 1e-10, RULE)
    assert found.where is Where.BACKWARD and found.first_point.label == "attn"
    assert (found.first_point.worst_sample, found.first_point.worst_token) == (0, 0)
    assert first_divergence("a", b, "b", b, 1e-10, RULE).where is Where.NOWHERE


def test_only_tokens_both_arms_computed_are_compared():
    """A token one arm did not compute (a dropped sample) is not an error of the module: the shared tokens decide."""
    a = captured({"attn": [1.0, 1.0, 9.0, 9.0]}, {}, [1, 1, 0, 0])
    b = captured({"attn": [1.0, 1.0, 1.0, 1.0]}, {}, [1, 1, 1, 1])
    found = first_divergence("a", a, "b", b, 1e-10, RULE)
    assert found.where is Where.NOWHERE and found.tokens == 2
    assert first_divergence("a", replace(a, seen=torch.ones(4)), "b", b, 1e-10, RULE).where is Where.FORWARD
    assert not math.isnan(found.forward[0].error)


def test_samples_changed_on_purpose_are_not_compared():
    """Sample 0 differs (a replaced document), sample 1 is kept: only sample 1 decides; a kept sample that differs
    is still found, and its place named."""
    a = captured({"embed": [9.0, 9.0, 3.0, 4.0], "attn": [9.0, 9.0, 1.0, 1.0]}, {}, [1, 1, 1, 1])
    b = captured({"embed": [1.0, 2.0, 3.0, 4.0], "attn": [1.0, 1.0, 1.0, 1.0]}, {}, [1, 1, 1, 1])
    assert first_divergence("a", a, "b", b, 1e-10, RULE).first_point.label == "embed", "the control: every sample compared"
    assert first_divergence("a", a, "b", b, 1e-10, RULE, samples=[1]).where is Where.NOWHERE
    a.forward["attn"][3] = 5.0
    found = first_divergence("a", a, "b", b, 1e-10, RULE, samples=[1])
    assert found.where is Where.FORWARD and found.first_point.label == "attn" and found.tokens == 2
    assert (found.first_point.worst_sample, found.first_point.worst_token) == (1, 1)


def test_a_sample_of_another_length_is_skipped_when_not_kept():
    """document_isolation's other_lengths arm: a replaced document of another length shifts the later samples' rows."""
    longer = Activations(lengths=[3, 2], dims=1, points=[Point("attn", PointKind.OUTPUT, "attn")],
                         forward={"attn": torch.tensor([7.0, 7.0, 7.0, 1.0, 2.0], dtype=torch.float64)[:, None]},
                         seen=torch.ones(5, dtype=torch.float64))
    b = captured({"attn": [1.0, 1.0, 1.0, 2.0]}, {}, [1, 1, 1, 1])
    assert first_divergence("a", longer, "b", b, 1e-10, RULE).where is Where.UNAVAILABLE
    found = first_divergence("a", longer, "b", b, 1e-10, RULE, samples=[1])
    assert found.where is Where.NOWHERE and found.tokens == 2
    assert first_divergence("a", longer, "b", b, 1e-10, RULE, samples=[0, 1]).where is Where.UNAVAILABLE
