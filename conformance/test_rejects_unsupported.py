"""Declared capabilities are honoured in both directions (the OpInfo rule for unsupported dtypes):
a case the engine declares unsupported must be rejected with UnsupportedCase, never computed.

The supported direction is the rest of the suite: every scenario runs the supported cases.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from packcheck.harness.contract import Layout, LayoutKind, LossSpec, ModelSpec, PadPoison, Partition
from packcheck.harness.data.rl import rollout_samples
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios.poisoned_pads import canary_of

LAYOUTS = {
    "unpacked-right": Layout(kind=LayoutKind.UNPACKED),
    "unpacked-left": Layout(kind=LayoutKind.UNPACKED, padding_side="left"),
    "packed": Layout(kind=LayoutKind.PACKED, seq_len=48),
    "stacked": Layout(kind=LayoutKind.STACKED),
}
PROBES = ("unknown_family", "float64", "float32", "bfloat16", "cuda", "ppo_clip", "grpo_advantages")
BACKENDS = ("auto", "sdpa", "sdpa_causal", "flex", "no_such_backend")
# probes of a part of the loss no layout or backend bears on: one case each, not one per layout and backend
ONCE = ("grpo_advantages",)


def probe_cases(family: str):
    setting = setting_for(family, "float64", "cpu")
    samples = samples_for(setting, MIXED_DOCUMENTS)
    for (layout_name, layout), backend, probe in itertools.product(LAYOUTS.items(), BACKENDS, PROBES):
        if probe in ONCE and (layout_name, backend) != ("unpacked-right", "auto"):
            continue
        case = arm(setting, f"{layout_name}-{backend}-{probe}", samples, layout, Partition.all_in_one(len(samples)), attention=backend)
        if probe == "unknown_family":
            case = case.with_(model=ModelSpec(family="unknown_family", config=case.model.config, seed=0, checkpoint=case.model.checkpoint))
        elif probe == "cuda":
            case = case.with_(device="cuda")
        elif probe == "ppo_clip":
            case = case.with_(samples=rollout_samples(samples), loss=LossSpec(kind="ppo_clip", entropy_coef=0.01))
        elif probe == "grpo_advantages":  # advantages the engine must compute itself, from rewards and groups
            grouped = tuple(replace(s, advantages=None, reward=float(i % 3), group=i // 4) for i, s in enumerate(rollout_samples(samples)))
            case = case.with_(samples=grouped, loss=LossSpec(kind="ppo_clip", advantage="grpo"))
        else:
            case = case.with_(dtype=probe)
        yield case
    # one probe of the pad-poison request beside the matrix (an engine declines it or not whatever the layout)
    packed_case = arm(setting, "packed-auto-pad_poison", samples, LAYOUTS["packed"], Partition.all_in_one(len(samples)))
    yield packed_case.with_(pad_poison=PadPoison(canary=canary_of(packed_case)))


def test_declared_unsupported_cases_are_rejected_loudly(engine, family, packcheck_pool):
    """Each probe the engine declines (by its declaration or its own unsupported_reason, asked in its
    process) is forced on it anyway: it must raise UnsupportedCase, never compute."""
    rejected = 0
    for case in probe_cases(family):
        reason = engine.unsupported_reason(case) or packcheck_pool.reason(engine.spec, case)
        if reason is None:
            continue
        rejected += 1
        outcome = packcheck_pool.force(engine.spec, case)
        assert outcome.raised_unsupported, (
            f"handed case {case.name!r}, which it declines ({reason}), the engine did not raise UnsupportedCase:\n{outcome.describe()}")
    assert rejected > 0, "the probe matrix found nothing this engine declares unsupported: widen the probes"
