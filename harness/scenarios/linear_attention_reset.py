"""linear_attention_reset: a document's state starts empty at its first token and is never cut
anywhere else: changing the document before it changes nothing of it (log-probs, loss, count,
every gradient), and a context-parallel cut inside a document changes nothing at all.

Each packed row holds documents whose loss mask is empty (A, the perturbed ones) right before,
or around, documents that carry the whole loss (B). An arm replaces the A documents' tokens; B's
log-probs, the loss and every gradient (the gradient of B's loss, since A carries none) must not
move, whatever leaks: a conv or recurrent state carried across the boundary (linear attention,
Mamba), attention across documents, positions. Layer level through the contract: every parameter
gradient is compared by name, so a failing verdict names the first layer whose gradients moved.
The harness writes the checkpoint, so it makes the state slow to forget: linear-attention gates
are seeded with exp(g) in ~[0.98, 1) (harness/models/checkpoint.py, SLOW_DECAY), and a leak
cannot hide in a state that would have vanished before reaching B.

The same pair of arms runs again with cp=2 (each cp_style), the cut falling inside a B document
in the first row and inside an A document in the second: the CP arms must equal the single
process on everything (a shard cut is no boundary: resetting the conv or state there is the
gdn-cp-conv-shard-reset bug), and perturbing A under CP must again leave B alone. It runs on every
family: on dense ones it is a cheap isolation check of gradients and CP, where document_isolation
checks single-process log-probs only. The invariant needs a loss that is a sum over documents:
an MoE load-balancing loss couples every token of the global batch by its definition (tokens per
expert over the batch), so on a family that has one the arms run with it switched off
(`output_router_logits: false` in their checkpoint); routing and the experts still run.
"""

from __future__ import annotations

import dataclasses

from packcheck.harness.compare import Arms, compare_logprobs
from packcheck.harness.compare.arms import compare_dloss_dlogprobs, compare_scalars, compare_tensors
from packcheck.harness.contract import ParallelPlan, packed
from packcheck.harness.contract.parallel import CP_STYLES
from packcheck.harness.data.samples import perturbed
from packcheck.harness.judging.cases import arm, for_model, input_seed, positions, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.models import model_spec
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import every_arm_against, failing

SEQ_LEN = 48  # cp=2 cuts each row at token 24
# (length, loss mask): row 1 = A | B with the cut inside B; row 2 = B | A | B | B with the cut inside A
DOCUMENTS = ((20, "none"), (28, "all"),
             (9, "response"), (20, "none"), (2, "all"), (17, "all"))
PERTURBED = tuple(i for i, (_, mask) in enumerate(DOCUMENTS) if mask == "none")
WATCHED = tuple(i for i in range(len(DOCUMENTS)) if i not in PERTURBED)
BASE, OTHER = "base", "other_tokens"
CP_ARMS = tuple(f"cp2_{style}" for style in CP_STYLES)
PERTURBED_ARMS = (OTHER, *(f"{name}_{OTHER}" for name in CP_ARMS))  # each judged against BASE outside the perturbed documents


def documents_only(setting: Setting) -> Setting:
    """The setting with any batch-coupling router loss switched off (see the module docstring)."""
    if not setting.model.config.get("output_router_logits"):
        return setting
    return dataclasses.replace(setting, model=model_spec(setting.family, setting.model.seed, **{**setting.model.config, "output_router_logits": False}))


def build(setting: Setting) -> dict:
    setting = documents_only(setting)
    base = samples_for(setting, DOCUMENTS)
    # a perturbed document goes through for_model as document_isolation's do: random tokens can hit a VLM's image placeholder
    other = list(base)
    for i, at in positions(setting, PERTURBED):  # i: the document's index in DOCUMENTS, at: its place in `base`
        other[at] = for_model(setting, [perturbed(base[at], setting.model.vocab_size, seed=input_seed(setting, 3000 + i))], first=i)[0]
    arms = {BASE: arm(setting, BASE, base, packed(SEQ_LEN)), OTHER: arm(setting, OTHER, other, packed(SEQ_LEN))}
    for style, name in zip(CP_STYLES, CP_ARMS):
        plan = ParallelPlan(cp=2, cp_style=style)
        arms[name] = arm(setting, name, base, packed(SEQ_LEN), parallel=plan)
        arms[f"{name}_{OTHER}"] = arm(setting, f"{name}_{OTHER}", other, packed(SEQ_LEN), parallel=plan)
    return arms


def watched(setting: Setting) -> list[int]:
    """The B documents, which no arm changes: the ones whose log-probs every arm must agree on."""
    return [at for _, at in positions(setting, WATCHED)]


def unchanged_outside_perturbed(j: Judgement, name: str) -> list:
    """B's log-probs, the loss, the count, the loss's weights and every gradient equal the base arm's."""
    arms, observed, reference = Arms(name, BASE), j.results[name], j.results[BASE]
    return [compare_logprobs(arms, observed, reference, j.tolerance, j.locate(name), watched(j.setting)),
            *compare_scalars(arms, observed, reference, j.tolerance),
            *compare_dloss_dlogprobs(arms, observed, reference, j.tolerance, j.locate(name)),
            *compare_tensors(arms, "grad", observed.grads, reference.grads, j.tolerance)]


def judge(j: Judgement) -> list:
    same_samples = Judgement(setting=j.setting, cases=j.cases, tolerance=j.tolerance,
                             results={name: r for name, r in j.results.items() if name == BASE or name in CP_ARMS})
    perturbed_arms = [name for name in j.results if name in PERTURBED_ARMS]
    return every_arm_against(same_samples, BASE) + [c for name in perturbed_arms for c in unchanged_outside_perturbed(j, name)]


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed, baseline=BASE):
        return shared
    if any(c.arms.arm.name in CP_ARMS for c in failed):
        return ("the same rows give other results under context parallelism: a shard cut inside a document is treated as a "
                "boundary (conv or recurrent state reset, or boundaries recomputed per shard) or the shard's state is not carried")
    if failing(failed, "logprobs"):
        return ("changing a document with no loss moves the next documents' log-probs: state leaks across the packed boundary "
                "(linear-attention conv/recurrent state not reset per document, no cu_seqlens; or attention across documents)")
    return ("log-probs are isolated but the loss or gradients of the other documents move: the backward carries gradient "
            "across the boundary (state reset in the forward only), or the perturbed document's tokens reach the loss")


LINEAR_ATTENTION_RESET = Scenario(
    name="linear_attention_reset",
    invariant=("perturbing documents with no loss leaves the other documents' log-probs, the loss and every gradient unchanged, "
               "with slow-decay linear-attention gates, single-process and cp=2 with cuts inside documents; cp=2 equals the single process"),
    catches=("linear-attn-state-leak", "gdn-cp-conv-shard-reset"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset(CP_ARMS) | frozenset(f"{name}_{OTHER}" for name in CP_ARMS),
    disk_arms=6,
    kept_samples=watched,
)
