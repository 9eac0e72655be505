"""document_isolation: changing document A changes nothing of any other document's log-probs.

Every other sample of a packed batch is replaced (same length, new tokens; and, in a second arm,
a new length, which also reshuffles the rows); the untouched samples' per-token log-probs must
not move. A perturbation test needs no second layout and no oracle: any leak through attention,
positions, convolution or recurrent state moves them.
"""

from __future__ import annotations

from packcheck.harness.compare import Arms, compare_logprobs
from packcheck.harness.contract import packed
from packcheck.harness.data.samples import MIXED_DOCUMENTS, perturbed
from packcheck.harness.judging.cases import arm, for_model, input_seed, positions, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting

SEQ_LEN = 48
PERTURBED = range(0, len(MIXED_DOCUMENTS), 2)
WATCHED = range(1, len(MIXED_DOCUMENTS), 2)


def build(setting: Setting) -> dict:
    base = samples_for(setting, MIXED_DOCUMENTS)
    vocab = setting.model.vocab_size
    content = list(base)
    resized = list(base)
    for i, at in positions(setting, PERTURBED):  # i: the document's index in MIXED_DOCUMENTS, at: its place in `base`
        content[at], = for_model(setting, [perturbed(base[at], vocab, seed=input_seed(setting, 1000 + i))], first=i)
        new_length = min(SEQ_LEN * setting.data_scale, max(1, len(base[at].input_ids) + (5 if i % 4 == 0 else -3)))
        resized[at], = for_model(setting, [perturbed(base[at], vocab, seed=input_seed(setting, 2000 + i), length=new_length)], first=i)
    return {
        "base": arm(setting, "base", base, packed(SEQ_LEN)),
        "other_tokens": arm(setting, "other_tokens", content, packed(SEQ_LEN)),
        "other_lengths": arm(setting, "other_lengths", resized, packed(SEQ_LEN)),
    }


def watched(setting: Setting) -> list[int]:
    """The documents no arm replaces: the ones every arm's log-probs must agree on."""
    return [at for _, at in positions(setting, WATCHED)]


def judge(j: Judgement) -> list:
    return [
        compare_logprobs(Arms(name, "base"), j.results[name], j.results["base"], j.tolerance, j.locate(name), watched(j.setting))
        for name in ("other_tokens", "other_lengths")
    ]


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed):
        return shared
    arms = {c.arms.arm.name for c in failed}
    if arms == {"other_lengths"}:
        return (
            "changing a neighbour's length (not its tokens) moves other documents: something depends on absolute "
            "row offsets (positions not reset per document, or boundaries derived from them)"
        )
    return "changing one document's tokens moves the log-probs of other documents: information leaks across packed boundaries (attention mask, positions, or carried state)"


DOCUMENT_ISOLATION = Scenario(
    name="document_isolation",
    invariant="replacing some documents of a packed batch leaves every other document's per-token log-probs unchanged",
    catches=("cross-doc-attention", "linear-attn-state-leak", "one-token-doc-merged"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    disk_arms=3,
    kept_samples=watched,
)
