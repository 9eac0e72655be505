"""packed_vs_unpacked: the same samples give the same log-probs, loss, count and every gradient
whether each sample has its own padded row, samples share packed rows, or rows are length-bucketed.
"""

from __future__ import annotations

from packcheck.harness.compare import Arms, compare_results
from packcheck.harness.contract import UNPACKED, Layout, LayoutKind, packed
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.document_drift import drift_by_document
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import failing

SEQ_LEN = 48


def build(setting: Setting) -> dict:
    samples = samples_for(setting, MIXED_DOCUMENTS)
    return {
        "unpacked": arm(setting, "unpacked", samples, UNPACKED),
        "packed": arm(setting, "packed", samples, packed(SEQ_LEN)),
        "stacked": arm(setting, "stacked", samples, Layout(kind=LayoutKind.STACKED, bucket_width=8)),
    }


def judge(j: Judgement) -> list:
    rows = compare_results(Arms("packed", "unpacked"), j.results["packed"], j.results["unpacked"], j.tolerance, j.locate("packed"))
    if j.has("stacked"):
        rows += compare_results(Arms("stacked", "unpacked"), j.results["stacked"], j.results["unpacked"], j.tolerance, j.locate("stacked"))
    return rows


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed, baseline="unpacked"):
        return shared
    if failing(failed, "logprobs") and j.has("packed"):
        first, later = drift_by_document(j.cases["packed"], j.results["packed"], j.results["unpacked"])
        if first <= j.tolerance.logprobs < later:
            return (
                f"the first document of every packed row matches (error {first:.2g}) but later documents do not "
                f"(error {later:.2g}): documents see their predecessors in the row: cross-document attention, "
                "position ids not reset where boundaries are derived from positions, or linear-attention "
                "(conv/recurrent) state carried from one document into the next"
            )
        return "per-token log-probs depend on the layout: the model sees something the layout changes (mask, positions, padding)"
    if failing(failed, "num_loss_tokens") or failing(failed, "loss"):
        return "log-probs agree but the loss or its token count depends on the layout: label/mask assembly differs between layouts"
    return "gradients differ although log-probs and loss agree: the backward or the loss scaling depends on the layout"


PACKED_VS_UNPACKED = Scenario(
    name="packed_vs_unpacked",
    invariant="unpacked, packed and length-bucketed layouts of the same samples give the same log-probs, loss, count and every gradient",
    catches=("cross-doc-attention", "positions-not-reset", "linear-attn-state-leak", "logprobs-reported-shifted", "one-token-doc-merged"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset({"stacked"}),
    disk_arms=3,
)
