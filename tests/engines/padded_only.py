"""The reference (and a mutant) declaring what TRL's GRPOTrainer declares: padded layouts, token-mean, no
entropy, one process; for the test that the RL scenarios judge such an engine on its padded arms."""

from __future__ import annotations

from dataclasses import replace

from packcheck.harness.contract import Aggregation, LayoutKind
from packcheck.impls.mutants.rl_token_mean_scope import RlTokenMeanScope
from packcheck.impls.reference.engine import ReferenceEngine

PADDED = frozenset({LayoutKind.UNPACKED})


def padded_only(capabilities):
    return replace(capabilities, layouts=PADDED, aggregations=frozenset({Aggregation.TOKEN_MEAN}), loss_terms=frozenset({"dual_clip", "kl"}),
                   max_dp=1, max_cp=1, cp_styles=frozenset(), attention={name: PADDED for name in capabilities.attention})


class PaddedOnlyReference(ReferenceEngine):
    name = "reference.padded-only"
    capabilities = padded_only(ReferenceEngine.capabilities)


class PaddedOnlyTokenMeanScope(RlTokenMeanScope):
    name = "mutant.rl-token-mean-scope.padded-only"
    capabilities = padded_only(RlTokenMeanScope.capabilities)
