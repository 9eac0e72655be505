"""poisoned_pads: NaN and +Inf written into every pad position leave the loss, every gradient and every reported
statistic unchanged.

Pads are positions of the engine's own layout, which the harness cannot reach: each poisoned arm is its clean twin
with a request (Case.pad_poison, harness/contract/pad_poison.py) that the engine write NaN and +Inf into the logits
of every position holding no token, finite garbage into its embeddings' output and its router logits, and a known
row (30 at entry 0) into the logits of one canary token. Judged: the poisoned arm against its twin on the log-probs
(the canary's aside), loss, count, per-token weights, every gradient and the MoE router reports; and the canary's
reported log-prob against that row's (about -30 nats, far from any prediction of the model), the proof that the
engine wrote the request at the right positions of its layout (an engine that ignores it, or misplaces it, fails
there). The canary sits outside the loss mask (so nothing the loss sees changes) in a document that does not start
its row where there is one.

The pads come from the places layouts make them, in two pairs of arms: unpacked rows padded on the left, single
process (pads before a document: what a real position must not read, and the loss must skip), and packed rows under
ring cp=2 at an odd seq_len (their tail, the column the reference widens every row by for cp, shards that hold only
padding). Left padding goes single-process because it is the one a causal engine can leak from, so an engine without
CP is judged on it; a right-padded unpacked row pads as a packed row's tail does (after its documents). The samples are
mask_alignment's (masked tokens everywhere, for the canary). A loss masked by multiplication turns a pad's NaN into a
NaN loss (an invalid result whose diagnosis names the poison); a statistic taken over padding moves.
"""

from __future__ import annotations

import dataclasses

from packcheck.harness.compare import HARNESS, Arms, Comparison, compare_results
from packcheck.harness.contract import Case, Layout, LayoutKind, PadPoison, ParallelPlan, StepResult, canary_logprob, packed
from packcheck.harness.contract.rows import layout_rows
from packcheck.harness.data.samples import MASK_EDGE_CASES
from packcheck.harness.engines import Capabilities
from packcheck.harness.engines.capabilities import POISON_WHY
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import failing

# mask_alignment's 40 less one: its rows hold the same documents (39, 33 and 8 tokens at every seed), they are odd, so
# the reference widens each by a pad for cp=2, and the last row's second half, one rank's shard, is all padding
SEQ_LEN = 39
CLEAN = ("unpacked_left", "packed_cp2")
POISONED = {name: f"{name}_poisoned" for name in CLEAN}


def build(setting: Setting) -> dict:
    samples = samples_for(setting, MASK_EDGE_CASES)
    clean = {
        "unpacked_left": arm(setting, "unpacked_left", samples, Layout(kind=LayoutKind.UNPACKED, padding_side="left")),
        "packed_cp2": arm(setting, "packed_cp2", samples, packed(SEQ_LEN), parallel=ParallelPlan(cp=2, cp_style="ring")),
    }
    arms = {}
    for name, case in clean.items():
        arms[name] = case
        if (canary := canary_of(case)) is not None:
            arms[POISONED[name]] = case.with_(name=POISONED[name], pad_poison=PadPoison(canary=canary))
    return arms


def canary_of(case: Case) -> tuple[int, int] | None:
    """The last token outside the loss mask (never a sample's token 0), in row order, of a document that does not start
    its row (else of any document): the position an engine that misplaces its own rows' offsets gets wrong."""
    best, best_key = None, None
    for order, row in enumerate(layout_rows(case)):
        for sample, start in zip(row.samples, row.starts(case)):
            mask = case.samples[sample].loss_mask
            for token in range(1, len(mask)):
                key = (start > 0, order, start + token)
                if not mask[token] and (best_key is None or key > best_key):
                    best, best_key = (sample, token), key
    return best


def applies(setting: Setting, capabilities: Capabilities) -> str | None:
    return None if capabilities.pad_poison else f"the engine does not declare Capabilities(pad_poison=True): {POISON_WHY}"


def judge(j: Judgement) -> list:
    rows = []
    for clean, name in POISONED.items():
        if not j.has(clean, name):
            continue
        canary = j.cases[name].pad_poison.canary
        rows.append(compare_canary(j, name, canary))
        poisoned = with_canary_of(j.results[name], j.results[clean], canary)
        rows += compare_results(Arms(name, clean), poisoned, j.results[clean], j.tolerance, j.locate(name))
    return rows


def compare_canary(j: Judgement, name: str, canary: tuple[int, int]) -> Comparison:
    """The canary's reported log-prob against the log-softmax of the row the request writes there (about -30 nats)."""
    sample, token = canary
    case = j.cases[name]
    vocab, label = case.model.vocab_size, case.samples[sample].input_ids[token]
    reported, expected = float(j.results[name].logprobs[sample][token]), canary_logprob(vocab, label)
    return Comparison(arms=Arms(name, HARNESS), quantity="logprobs", item="canary", metric="max_abs", observed=abs(reported - expected),
                      **j.tolerance.by("logprobs"),
                      where=f"sample {sample} token {token} (the canary, outside the loss mask): reported {reported:.12g}, the "
                            f"canary row's {expected:.12g}")


def with_canary_of(result: StepResult, clean: StepResult, canary: tuple[int, int]) -> StepResult:
    """`result` with the clean twin's log-prob at the canary (judged on its own row): the arm-against-arm row then
    holds every other token to equality."""
    sample, token = canary
    logprobs = [t.clone() for t in result.logprobs]
    logprobs[sample][token] = clean.logprobs[sample][token]
    return dataclasses.replace(result, logprobs=logprobs)


def diagnose(j: Judgement, failed: list) -> str:
    if failing(failed) and all(c.item == "canary" for c in failed):
        return ("the canary's reported log-prob is not its row's while everything else agrees: the engine did not write "
                "Case.pad_poison where it asks (it ignores the request, or writes it at other positions of its rows: an offset "
                "of its own layout taken wrongly), so its pads went unpoisoned too")
    if shared := shared_diagnosis(j, failed):
        return shared
    if [c for c in failed if c.quantity == "logprobs" and c.item != "canary"]:
        return ("a real token's log-prob depends on what the pad positions hold: a real position reads a pad (attention that "
                "lets real queries see pad keys, a linear-attention or convolution state carried out of the padding, the "
                "poison written at a real position)")
    if failing(failed, "aux_loss") or failing(failed, "router_tokens_per_expert"):
        return ("the MoE router's statistics depend on what the pad positions hold while every log-prob agrees: the "
                "load-balancing loss takes its router probabilities or counts over padding (TransformerEngine PR #2819's "
                "class, Megatron-LM #1984), and every gradient above a router moves with it")
    return ("the loss or a gradient depends on what the pad positions hold while every real log-prob agrees: a pad position is "
            "in a reduction (the loss, a statistic, a weight's gradient) that must skip it")


POISONED_PADS = Scenario(
    name="poisoned_pads",
    invariant="NaN and +Inf written into every pad position (and finite garbage into its embeddings and router logits) leave "
              "the log-probs, loss, count, per-token weights, every gradient and the router reports unchanged; the canary "
              "token's log-prob is exactly that of the row written there",
    catches=("pad-logits-mask-multiply", "router-probs-over-padding", "linear-attn-state-leak"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    applies=applies,
    # each pair is judged on its own: an engine that never pads on the left, or has no CP, is judged on the other
    optional_arms=frozenset({*CLEAN, *POISONED.values()}),
    notes="the poison is the engine's to write (Case.pad_poison): an engine without Capabilities(pad_poison=True) is unsupported here",
    disk_arms=4,
)
