"""Engines whose model is wrong the same way in every arm: once green without an absolute check (issue 28), or with
one that never reached their bug (issue 48: a RoPE table of 32 positions, a row's ninth and later documents merged,
which pass every relative scenario by construction). tests/test_absolute_check.py runs them."""

from __future__ import annotations

import dataclasses
import math

import torch

from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import Capabilities
from packcheck.harness.golden import GoldenProblem, load_golden
from packcheck.impls.mutants.rope_theta_default import RopeThetaDefault
from packcheck.impls.reference.data.rows import positions_and_segments
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step.pipeline import REFERENCE

PLAIN = dataclasses.replace(ReferenceEngine.capabilities, optimizer_step=False, reports=frozenset())


def plain(result: StepResult | None) -> StepResult | None:
    """The result with nothing the engine does not declare."""
    return None if result is None else dataclasses.replace(result, dloss_dlogprobs=None, params_after=None, aux_loss=None,
                                                             router_tokens_per_expert=None)


class WrongRope(RopeThetaDefault):
    """An adapter whose RoPE base is not the checkpoint's (mutant.rope-theta-default), with no optimizer step and no
    dloss_dlogprobs: golden_regression and gradient_oracle cannot judge it."""

    name = "wrong.rope-theta"
    capabilities: Capabilities = PLAIN

    def train(self, case: Case, mesh: Mesh) -> StepResult | None:
        return plain(super().train(case, mesh))


class NoModel(ReferenceEngine):
    """No model at all: each token's log-prob is a function of its id, every gradient is one fixed tensor; the loss and
    the count are the contract's for those log-probs (the reference's weights, so the shapes and counts are right)."""

    name = "wrong.no-model"
    capabilities: Capabilities = PLAIN

    def train(self, case: Case, mesh: Mesh) -> StepResult | None:
        result = super().train(case, mesh)
        if result is None:
            return None
        vocab = case.model.vocab_size
        logprobs = [torch.where(lp == 0, lp, -math.log(vocab) - 0.01 * (torch.tensor(s.input_ids, dtype=lp.dtype) % 7))
                    for lp, s in zip(result.logprobs, case.samples)]
        loss = float(sum((w.double() * lp.double()).sum() for w, lp in zip(result.dloss_dlogprobs, logprobs)))
        grads = {name: torch.full_like(g, 1e-3) for name, g in result.grads.items()}
        return plain(dataclasses.replace(result, logprobs=logprobs, loss=loss, grads=grads))


class ReadsGolden(WrongRope):
    """The wrong-RoPE adapter that returns the stored golden (package data) for the golden's own case, and takes an
    optimizer step so that golden_regression judges it."""

    name = "wrong.reads-golden"
    capabilities: Capabilities = dataclasses.replace(PLAIN, optimizer_step=True, reports=frozenset({"params_after"}))

    def train(self, case: Case, mesh: Mesh) -> StepResult | None:
        try:
            result = load_golden(case.model.family, case)
        except GoldenProblem:  # not the golden's case: the engine's own (wrong) answer
            result = RopeThetaDefault.train(self, case, mesh)
        return None if result is None else dataclasses.replace(plain(result), params_after=result.params_after)


# oracle_agreement's own case: one rank, micro-batches of these many samples (harness/scenarios/oracle_agreement.py)
ABSOLUTE_SHAPE = (4, 6, 32, 1)


def absolute_shaped(case: Case) -> bool:
    return case.parallel.world_size == 1 and tuple(map(len, case.partition.micro_batches)) == ABSOLUTE_SHAPE


class RecognisesTheAbsoluteCase(WrongRope):
    """The wrong RoPE base everywhere but on a case of the absolute check's shape, where it computes the reference's step
    (issue 48 item 1): every relative scenario sees one consistent wrong model, oracle_agreement's own case the right
    one. It passed the whole llama matrix, exit 0, before oracle_agreement judged arms drawn from the others."""

    name = "wrong.recognises-the-absolute-case"

    def train(self, case: Case, mesh: Mesh) -> StepResult | None:
        if absolute_shaped(case):
            return plain(ReferenceEngine.train(self, case, mesh))
        return super().train(case, mesh)


class DeclinesTheAbsoluteCase(ReadsGolden):
    """The wrong RoPE base; declines oracle_agreement's case with a plausible reason, and returns the stored golden for
    the golden's case (issue 48 item 3): golden_regression passed, oracle_agreement was unsupported, exit 0."""

    name = "wrong.declines-the-absolute-case"

    def unsupported_reason(self, case: Case) -> str | None:
        if absolute_shaped(case):
            return "micro-batches of unequal sizes need an optimizer step to be accumulated"
        return super().unsupported_reason(case)


ROPE_POSITIONS = 32
MERGED_FROM = 8  # the index of a row's ninth document


def positions_capped(segment_lengths):
    """Positions past the RoPE table's last reuse its angles."""
    positions, segments = positions_and_segments(segment_lengths)
    return [min(p, ROPE_POSITIONS - 1) for p in positions], segments


def later_documents_merged(segment_lengths):
    """A row's ninth and later documents attend to each other, as one document."""
    positions, segments = positions_and_segments(segment_lengths)
    return positions, [min(s, MERGED_FROM) for s in segments]


class ShortRopeTable(ReferenceEngine):
    """A RoPE table of 32 positions (issue 48 item 2): later positions get position 31's angles. Every arm is wrong the
    same way wherever a document is longer than 32 tokens; it declares everything the reference does."""

    name = "wrong.rope-table-32"
    pipeline = dataclasses.replace(REFERENCE, positions_and_segments=positions_capped)


class MergesLaterDocuments(ReferenceEngine):
    """A packed row's ninth and later documents merged into one for attention (issue 48 item 2); it declares everything
    the reference does."""

    name = "wrong.merges-later-documents"
    pipeline = dataclasses.replace(REFERENCE, positions_and_segments=later_documents_merged)
