"""docs/adapters.md's checklist (issue 45, item 10) says, one line each, what adapters used to guess; each line is
checked here against what the harness does: the validation (harness/engines/validate.py), optimizer_step's judge, the
capability defaults, and the checkpoint packcheck writes for a tied model."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch

from packcheck.harness.compare import tolerance_for
from packcheck.harness.engines import Capabilities, validate_result
from packcheck.harness.engines.validate import InvalidResult
from packcheck.harness.models import FAMILIES
from packcheck.harness.models.checkpoint import parameter_shapes
from packcheck.harness.run.dtype_choice import choose_dtype
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios import Judgement
from packcheck.harness.scenarios.optimizer_step import BASELINE, FROZEN_BASELINE, OPTIMIZER_STEP, build, checkpoint_params
from tests.test_optimizer_step import fabricated

DOC = Path(__file__).resolve().parents[1] / "docs" / "adapters.md"
TOPICS = ("Gradients before clipping.", "Frozen parameters.", "Several widths in one stacked micro-batch.", "Tensors or lists.",
          "Rows of all ranks.", "Default dtypes.", "Tied embeddings.")


def checklist() -> dict[str, str]:
    text = DOC.read_text()
    section = text.split("### Checklist: what the contract says where adapters guess", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^- \*\*(.+?)\*\* (.*?)(?=^- |\Z)", section, re.M | re.S)
    return {title: " ".join(body.split()) for title, body in items}


@pytest.fixture(scope="module")
def arms():
    setting = setting_for("llama", "float64", "cpu")
    cases = build(setting)
    j = Judgement(setting=setting, cases=cases, results={}, tolerance=tolerance_for("float64"))
    return j, checkpoint_params(j)


def valid(cases, before, arm: str = BASELINE):
    """optimizer_step's fabricated result (tests/test_optimizer_step.py) as plain containers, with log-probs that depend on
    the tokens (all-zero ones read as not computed)."""
    result = fabricated(cases, before, arm)
    logprobs = [torch.cat([torch.zeros(1, dtype=torch.float64), -torch.rand(len(lp) - 1, dtype=torch.float64) - 0.1]) for lp in result.logprobs]
    return dataclasses.replace(result, logprobs=logprobs, params_after=dict(result.params_after))


def invalid(case, result) -> str:
    with pytest.raises(InvalidResult) as raised:
        validate_result("adapter", case, result)
    return str(raised.value)


def test_the_checklist_has_one_line_per_topic():
    assert tuple(checklist()) == TOPICS


def test_gradients_are_reported_before_clipping(arms):
    j, before = arms
    unclipped = fabricated(j.cases, before)
    assert "*before* any clipping" in checklist()["Gradients before clipping."]
    rows = OPTIMIZER_STEP.judge(dataclasses.replace(j, results={BASELINE: unclipped}))
    assert rows and all(c.passed for c in rows), "unclipped gradients, the pre-clip norm: the harness's own step agrees"
    coefficient = j.cases[BASELINE].optimizer.clip_coefficient(unclipped.grad_norm)
    assert coefficient < 1, "the case clips"
    clipped = dataclasses.replace(unclipped, grads={n: g * coefficient for n, g in unclipped.grads.items()})
    failed = [c for c in OPTIMIZER_STEP.judge(dataclasses.replace(j, results={BASELINE: clipped})) if not c.passed]
    assert failed and {c.quantity for c in failed} >= {"grad_norm"}, "clipped gradients do not match the pre-clip norm"


def test_frozen_parameters_have_no_gradient_and_an_unchanged_params_after(arms):
    j, before = arms
    case = j.cases[FROZEN_BASELINE]
    good = valid(j.cases, before, FROZEN_BASELINE)
    frozen = next(n for n in before if case.model.is_frozen(n))
    assert frozen not in good.grads and frozen in good.params_after
    validate_result("adapter", case, good)
    assert "frozen parameters" in invalid(case, dataclasses.replace(good, grads=good.grads | {frozen: torch.zeros_like(before[frozen])}))
    assert "lacks 1 parameters" in invalid(case, dataclasses.replace(good, params_after={n: t for n, t in good.params_after.items() if n != frozen}))
    line = checklist()["Frozen parameters."]
    assert "leave out every parameter under `case.model.frozen`" in line and "bit-identical" in line


def test_tensors_lists_and_plain_numbers(arms):
    j, before = arms
    case = j.cases[BASELINE]
    good = valid(j.cases, before)
    validate_result("adapter", case, good)
    assert "expected a torch.Tensor" in invalid(case, dataclasses.replace(good, logprobs=[t.tolist() for t in good.logprobs]))
    assert "expected a finite float" in invalid(case, dataclasses.replace(good, loss=torch.tensor(good.loss)))
    assert "expected a dict" in invalid(case, dataclasses.replace(good, grads=list(good.grads.values())))
    assert "a nested list where a tensor belongs is an error" in checklist()["Tensors or lists."]


def test_default_dtypes_and_the_precision_of_a_result(arms):
    j, before = arms
    declared = Capabilities(families=frozenset({"llama"})).dtypes
    assert declared == {"float64", "float32"} and choose_dtype("e", Capabilities(families=frozenset({"llama"}))).dtype == "float64"
    assert 'defaults to `{"float64", "float32"}`' in checklist()["Default dtypes."]
    good = valid(j.cases, before)
    low = dataclasses.replace(good, grads={n: g.float() for n, g in good.grads.items()})
    assert "not a lower precision than the run's" in invalid(j.cases[BASELINE], low)


def test_tied_embeddings_have_one_name_in_the_checkpoint():
    config = FAMILIES["llama"].tiny_config
    assert config["tie_word_embeddings"] is False and "lm_head.weight" in parameter_shapes("llama", config), "packcheck unties them"
    tied = parameter_shapes("llama", config | {"tie_word_embeddings": True})
    assert "lm_head.weight" not in tied and "model.embed_tokens.weight" in tied
    assert "`model.embed_tokens.weight`" in checklist()["Tied embeddings."]


def test_rank_0_reports_the_rows_of_every_rank(arms):
    j, before = arms
    case = j.cases["dp2_replicate"]
    good = valid(j.cases, before, "dp2_replicate")
    validate_result("adapter", case, good)
    own = [i for step in case.partition.per_rank[0] for i in step]  # what rank 0 ran itself
    said = invalid(case, dataclasses.replace(good, logprobs=[good.logprobs[i] for i in own]))
    assert f"has {len(own)} entries for {len(case.samples)} samples" in said, said
    assert "Rank 0 returns every sample's log-probs" in checklist()["Rows of all ranks."]
