"""oracle_agreement: the engine's step equals the float64 reference's on the same case: the absolute check every engine gets.

Every other scenario compares arms of one engine with each other, so a model that is wrong the same way in every
arm (a RoPE base that is not the checkpoint's, a missing norm, log-probs with no model behind them) passes them
all; golden_regression sees it only for an engine with an optimizer step at the goldens' inputs, gradient_oracle
only for one that reports dloss_dlogprobs. Here the engine runs a packed and an unpacked arm (four uneven
micro-batches, the contract's SFT loss, no optimizer step, nothing optional reported; either may be declined,
not both) and ORACLE_ENGINE runs each same case (the checkpoint, samples, layout and partition of this run's
--model and --seed) in float64 on the case's device (judging/oracle_arms.py); the engine's log-probs, loss,
loss-token count, weights and every gradient are judged against it.

The first two micro-batches' samples are the goldens' document lengths with tokens and masks of their own seed
(input_seed), so no stored golden is ever the answer to this case: an engine that returns a stored golden fails here
at every input (docs/isolation.md). The other two hold what real packed rows hold and no relative scenario's rows
reach: a row of MANY_DOCUMENTS documents, and a document longer than the longest any sample set has. An engine whose
RoPE table stops at 32 positions, or that merges a row's ninth and later documents, is wrong the same way in every
arm of the relative scenarios; it passed them all and this one until these micro-batches (issue 48). A family the
reference cannot model leaves this verdict unsupported, and the run says it had no absolute check
(harness/run/absolute.py).

Its case has a shape an engine can recognise, so in a run it also judges arms the engine ran for the run's relative
scenarios, drawn after they ran (harness/run/spot_checks.py), each named by its scenario and arm
("packed_vs_unpacked/packed"), against the reference's run of the same case: an engine right only here is wrong there.
"""

from __future__ import annotations

from packcheck.harness.compare import ArmId, Arms, Role, compare_results
from packcheck.harness.compare.rounding_bound import definition_at
from packcheck.harness.contract import UNPACKED, Partition, packed
from packcheck.harness.data.lengths import varied
from packcheck.harness.data.samples import MIXED_DOCUMENTS, PACKED_AT, make_samples, scaled
from packcheck.harness.engines import Capabilities
from packcheck.harness.judging.cases import arm, for_model, input_seed, kept
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.oracle_memory import oracle_memory_reason
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.judging.oracle_arms import oracle_of
from packcheck.harness.judging.router_diagnosis import aux_gradient_diagnosis
from packcheck.harness.judging.truth import Bounds
from packcheck.harness.scenarios.base import Before, Scenario, Stage, from_setting
from packcheck.harness.scenarios.building import failing

MANY_DOCUMENTS = 32
SEQ_LEN = 48
LONGEST = max(length for spec in PACKED_AT for length, _ in spec)  # the longest document of any sample set (44)
# a row of MANY_DOCUMENTS documents of 1 and 2 tokens, exactly filled, then a row one document fills, longer than any
# other sample set's; rows as wide as the first two micro-batches' (48 positions, 4080 at 0.6b)
REAL_ROWS = tuple((1 + i % 2, "all") for i in range(MANY_DOCUMENTS)) + ((SEQ_LEN, "turns"),)
assert sum(length for length, _ in REAL_ROWS[:MANY_DOCUMENTS]) == SEQ_LEN > LONGEST
FIRST = len(MIXED_DOCUMENTS)
# uneven micro-batches, the first two as the goldens', then REAL_ROWS's row of many documents and its long document
# apart: in one micro-batch the unpacked arm pads all 33 to the long one (at 0.6b 33 rows of 4080 positions, whose
# float64 attention mask alone wanted 65 GiB of an H100)
PARTITION = Partition.single_rank([(0, 1, 2, 3), (4, 5, 6, 7, 8, 9), tuple(range(FIRST, FIRST + MANY_DOCUMENTS)),
                                   (FIRST + MANY_DOCUMENTS,)])
TOKEN_SEED = 28_001  # not 0: the goldens' tokens are seed 0's, and this case must never be one of them


def build(setting: Setting) -> dict:
    spec = varied(MIXED_DOCUMENTS, PACKED_AT[MIXED_DOCUMENTS], setting.seed) + REAL_ROWS  # lengths moved by --seed, as samples_for's
    samples = kept(setting, for_model(setting, make_samples(scaled(spec, setting.data_scale), setting.model.vocab_size,
                                                            seed=input_seed(setting, TOKEN_SEED))))
    return {"packed": arm(setting, "packed", samples, packed(SEQ_LEN), PARTITION),
            "unpacked": arm(setting, "unpacked", samples, UNPACKED, PARTITION)}


OWN_ARMS = ("packed", "unpacked")  # build's; the others a run hands it are drawn (harness/run/spot_checks.py)


def oracle(setting: Setting, before: Before) -> dict:
    """The engine's own case, run by the reference in float64 on the case's device (only for an engine arm that ran)."""
    return {name: oracle_of(case) for name, case in before.cases.items() if name in before.results}


def applies(setting: Setting, capabilities: Capabilities) -> str | None:
    """Every engine, wherever the float64 reference fits the case's device (not at 8B: judging/oracle_memory.py)."""
    return oracle_memory_reason(setting)


def judge(j: Judgement) -> list:
    # the loss and weights also by their rounding at the truth's log-probs in the engine's dtype (rounding_bound.py): a
    # loss over the two more micro-batches' tokens rounds further than the golden-sized noise floor allows in float32
    # (the reference's qwen3 loss at 1.4 of it, measured with a first, 96-token version of them); float64 keeps the table
    tol = j.bound
    return [row for name, result in j.results.items() if name in j.oracle
            for row in compare_results(Arms(name, ArmId(name).oracle), result, j.oracle[name], tol, j.locate(name),
                                       definition=definition_at(j.cases[name], j.oracle[name]))]


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed):
        return shared
    if drawn := drawn_only(j, failed):
        own = ("its own arms of this scenario agree" if any(name in j.results for name in OWN_ARMS)
               else "it declined this scenario's own arms")
        return (f"arms drawn from this run's relative scenarios ({', '.join(drawn)}) differ from the float64 reference's run "
                f"of the same cases, while {own}: the engine is right on the absolute check's case (recognised by its shape?) "
                "and wrong on the others, or wrong only on cases like the drawn ones")
    if failing(failed, "logprobs"):
        return ("the engine's forward differs from the float64 reference's on the same checkpoint and rows: the model math "
                "(RoPE base or positions, norms, attention, the loaded weights, or log-probs not computed by the model at all) "
                "differs in every arm, which the scenarios comparing the engine's arms with each other cannot see")
    if aux := aux_gradient_diagnosis(failed):
        return aux
    if failing(failed, "loss") or failing(failed, "num_loss_tokens"):
        return ("the log-probs agree with the reference but the loss or its token count does not: the loss is normalised or "
                "counted differently (two micro-batches of uneven token counts: a per-micro-batch mean?)")
    worst = max(failing(failed, "grad") or failed, key=lambda c: c.margin)
    return ("the forward and the loss agree with the reference but the gradients do not: the backward is wrong or the "
            f"gradients are not the loss's (scaled, hooked, or made up); worst {worst.item} ({worst.metric} {worst.observed:.3g})")


def drawn_only(j: Judgement, failed: list) -> list[str]:
    """The drawn arms that fail, where only drawn arms fail ([] otherwise)."""
    names = {c.arms.arm.name for c in failed}
    return [] if names & set(OWN_ARMS) else sorted(names)


ORACLE_AGREEMENT = Scenario(
    name="oracle_agreement",
    invariant=("log-probs, loss, count and every gradient equal the float64 reference's run of the engine's own case, and of "
               "arms drawn from the run's other verdicts after they ran"),
    catches=("rope-theta-default", "moe-aux-grad-dropped"),
    stages=(from_setting(build), Stage(build=oracle, role=Role.ORACLE)),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset(OWN_ARMS),
    applies=applies,
    bounds=Bounds.TRUTH,  # against float64 truth: the table in float64, else the family's golden noise floor (the table where it has none)
    absolute=True,
    takes_spot_arms=True,
    disk_arms=4,
)
