"""rl_step0_ratio: with old log-probs taken from the same engine, the importance ratio
exp(logp - old) is exactly 1 for every token, whichever layout computed old and new.

Before the first update, old and new policies are the same weights, so every ratio is 1, nothing
is clipped, the KL to a reference equal to the policy vanishes, and the loss is exactly
-sum(w * A), whatever the model: a ratio that is not 1 means the trainer does not reconstruct the
distributions the rollout saw (verl #2088, trlx #107, TRL #454). Rollout arms give old log-probs
from an unpacked and from a packed run; policy arms recompute them in another layout (packed from
unpacked, unpacked from packed, packed with an uneven partition, unpacked with one, length-bucketed, and (optional
arms) over two DP ranks and a dp2 x cp2 ring mesh), so a packing
bug that moves documents 2..k of a row shows as r != 1 exactly there. Judged per arm: the ratio
of every token is 1; every token's weight and the loss equal the definition at the engine's
log-probs, which at r = 1 is -A w (nothing clips, the KL gradient vanishes) and -sum(w A).
"""

from __future__ import annotations

from packcheck.harness.compare import compare_count, compare_policy, compare_ratio_is_one
from packcheck.harness.contract import SINGLE_PROCESS, UNPACKED, Layout, LayoutKind, LossSpec, ParallelPlan, Partition, packed
from packcheck.harness.data.rl import on_policy_samples, rollout_samples
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.document_drift import drift_by_document
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Before, Scenario, Stage, from_setting
from packcheck.harness.scenarios.building import COUNT_MISMATCH, failing

SEQ_LEN = 48
LOSS = LossSpec(kind="ppo_clip", dual_clip=3.0, kl_coef=0.1)  # ref = old: the KL term must vanish too
UNEVEN = Partition.single_rank([(0, 1, 2, 3, 4, 5), (6, 7), (8, 9)])
LAYOUTS = {"unpacked": UNPACKED, "packed": packed(SEQ_LEN)}
DP_UNEVEN = Partition(per_rank=(((0, 1, 2, 3), (4, 5)), ((6,), (7, 8, 9))))
ARMS = {  # arm -> (rollout it takes old log-probs from, layout, partition, parallel plan)
    "packed_from_unpacked": ("unpacked", packed(SEQ_LEN), None, SINGLE_PROCESS),
    "packed_uneven_from_unpacked": ("unpacked", packed(SEQ_LEN), UNEVEN, SINGLE_PROCESS),
    "unpacked_from_packed": ("packed", UNPACKED, None, SINGLE_PROCESS),
    "unpacked_uneven_from_unpacked": ("unpacked", UNPACKED, UNEVEN, SINGLE_PROCESS),  # other pad widths, other micro-batches
    "stacked_from_packed": ("packed", Layout(kind=LayoutKind.STACKED, bucket_width=8), None, SINGLE_PROCESS),
    # the rollout on one process, the update sharded: documents straddle the CP cuts of packed rows
    "packed_dp2_from_unpacked": ("unpacked", packed(SEQ_LEN), DP_UNEVEN, ParallelPlan(dp=2)),
    "packed_dp2_cp2_ring_from_unpacked": ("unpacked", packed(SEQ_LEN), DP_UNEVEN, ParallelPlan(dp=2, cp=2, cp_style="ring")),
}


def rollout_arm(rollout: str) -> str:
    return f"rollout_{rollout}"


def build(setting: Setting) -> dict:
    samples = rollout_samples(samples_for(setting, MIXED_DOCUMENTS))
    return {rollout_arm(name): arm(setting, rollout_arm(name), samples, layout, loss=LossSpec(kind="ppo_clip"))
            for name, layout in LAYOUTS.items()}


def policy_arms(setting: Setting, before: Before) -> dict:
    results = before.results
    base = samples_for(setting, MIXED_DOCUMENTS)
    arms = {}
    for name, (rollout, layout, partition, parallel) in ARMS.items():
        if rollout_arm(rollout) not in results:  # skipped: the engine does not run that layout
            continue
        samples = on_policy_samples(base, results[rollout_arm(rollout)].logprobs, seed=setting.seed)
        arms[name] = arm(setting, name, samples, layout, partition, loss=LOSS, parallel=parallel)
    return arms


def judge(j: Judgement) -> list:
    rows = []
    for name in ARMS:
        if not j.has(name):
            continue
        case, result = j.cases[name], j.results[name]
        rows.append(compare_ratio_is_one(case, result, j.tolerance, j.locate(name), name))
        rows.append(compare_count(case, result, name))
        rows += compare_policy(case, result, j.tolerance, j.locate(name), name)
    return rows


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed):
        return shared
    ratios = failing(failed, "ratio")
    if ratios and all(j.cases[c.arms.arm.name].parallel.cp > 1 for c in ratios):
        return (f"the ratio is not 1 at step 0 on the context-parallel arms only ({', '.join(sorted({c.arms.arm.name for c in ratios}))}): "
                "their new log-probs differ from the rollout's: a document straddling a shard cut is not one document "
                "(boundaries or RoPE positions computed per shard), or the key/value exchange misses part of the sequence")
    if ratios:
        name = ratios[0].arms.arm.name
        _, layout, _, _ = ARMS[name]
        packed_case = j.cases[name] if layout.kind is LayoutKind.PACKED else j.cases.get(rollout_arm("packed"))
        unpacked = j.results[rollout_arm("unpacked")] if layout.kind is LayoutKind.PACKED else j.results[name]
        first, later = (drift_by_document(packed_case, j.results[packed_case.name], unpacked)
                        if packed_case is not None and packed_case.name in j.results else (0.0, 0.0))
        if first <= j.tolerance.logprobs < later:
            return (f"the ratio is not 1 at step 0 for documents 2..k of packed rows only (first documents {first:.2g}, "
                    f"later ones {later:.2g}): the packed forward lets documents see their predecessors (cross-document "
                    "attention, positions not reset), so old and new log-probs disagree across layouts")
        return ("the ratio is not 1 at step 0: old and new log-probs of the same weights differ between layouts, so the "
                "trainer does not reconstruct the distributions the rollout saw")
    if failing(failed, "num_loss_tokens"):
        return COUNT_MISMATCH
    return ("the ratios are 1 but the loss or its weights are not -A w: at step 0 nothing may clip and the KL to an identical "
            "reference vanishes, so the loss is normalised differently from its definition (with an uneven partition only: "
            "per micro-batch)")


RL_STEP0_RATIO = Scenario(
    name="rl_step0_ratio",
    invariant="with old log-probs from the same engine, exp(logp - old) = 1 for every token of every packed sample "
              "(documents 2..k of a row included), across layouts, and the loss is exactly -sum(w * A)",
    catches=("cross-doc-attention", "positions-not-reset", "rl-token-mean-scope"),
    stages=(from_setting(build), Stage(build=policy_arms)),
    judge=judge,
    diagnose=diagnose,
    # each arm is judged on its own, when the engine runs its layout and that of its rollout (TRL's GRPOTrainer never packs)
    optional_arms=frozenset({*ARMS, *(rollout_arm(name) for name in LAYOUTS)}),
    disk_arms=9,
)
