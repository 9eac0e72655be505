"""packed_vs_unpacked: the same samples give the same log-probs, loss, count and every gradient
whether each sample has its own padded row, samples share packed rows, or rows are length-bucketed.

On a GPU two more arms pack rows longer than 65,536 tokens (state-spaces/mamba #1015: 16- and 32-bit
offsets and grid dimensions of kernels wrap past it): SKEWED_LENGTHS 1457 times longer, packed at
48 x 1457, so the first row holds 65,565 tokens and its third document crosses token 65,536, while the
longest document (64,108 tokens) keeps every unpacked row below it. The float64 CPU matrix leaves them
out: there the kernels are torch's own and the arms would cost minutes.
"""

from __future__ import annotations

from packcheck.harness.compare import Arms, compare_results
from packcheck.harness.contract import UNPACKED, Layout, LayoutKind, packed
from packcheck.harness.data.samples import MIXED_DOCUMENTS, SKEWED_LENGTHS, make_samples, scaled
from packcheck.harness.judging.cases import arm, for_model, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.document_drift import drift_by_document
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import failing

SEQ_LEN = 48
LONG_SCALE = 1457  # SKEWED_LENGTHS x 1457 at 48 x 1457: see the module docstring
LONG_ARMS = {"long_packed": "long_unpacked"}


def build(setting: Setting) -> dict:
    samples = samples_for(setting, MIXED_DOCUMENTS)
    return {
        "unpacked": arm(setting, "unpacked", samples, UNPACKED),
        "packed": arm(setting, "packed", samples, packed(SEQ_LEN)),
        "stacked": arm(setting, "stacked", samples, Layout(kind=LayoutKind.STACKED, bucket_width=8)),
    } | long_row_arms(setting)


def long_row_arms(setting: Setting) -> dict:
    """On a GPU, at the scenario's own size (not a shrunk or data-scaled one): a packed row past 65,536 tokens, and its
    documents unpacked."""
    if setting.device != "cuda" or setting.smaller is not None or setting.data_scale != 1:
        return {}
    samples = for_model(setting, make_samples(scaled(SKEWED_LENGTHS, LONG_SCALE), setting.model.vocab_size, seed=setting.seed))
    return {"long_packed": arm(setting, "long_packed", samples, packed(SEQ_LEN * LONG_SCALE)),
            "long_unpacked": arm(setting, "long_unpacked", samples, UNPACKED)}


def judge(j: Judgement) -> list:
    rows = compare_results(Arms("packed", "unpacked"), j.results["packed"], j.results["unpacked"], j.tolerance, j.locate("packed"))
    if j.has("stacked"):
        rows += compare_results(Arms("stacked", "unpacked"), j.results["stacked"], j.results["unpacked"], j.tolerance, j.locate("stacked"))
    for name, against in LONG_ARMS.items():
        if j.has(name) and j.has(against):
            rows += compare_results(Arms(name, against), j.results[name], j.results[against], j.tolerance, j.locate(name))
    return rows


def diagnose(j: Judgement, failed: list) -> str:
    if {c.arms.arm.name for c in failed} <= set(LONG_ARMS):
        return ("only the rows longer than 65,536 tokens differ from their documents unpacked: an offset, index or grid "
                "dimension of a kernel wraps past 65,536 (16 bits), or past 2^31 elements (32 bits)")
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
    catches=("cross-doc-attention", "positions-not-reset", "linear-attn-state-leak", "logprobs-reported-shifted", "one-token-doc-merged",
             "row-offsets-16bit"),  # the last on a GPU only (tests/test_gpu_mutants.py)
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset({"stacked", *LONG_ARMS, *LONG_ARMS.values()}),
    disk_arms=3,
)
