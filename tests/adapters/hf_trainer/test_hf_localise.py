"""hf_trainer through its capture hook (impls/adapters/hf_common/activations.py): the transformers model's named_modules
name the points, the collator's batches say where each sample sits. The Trainer's packed and padded arms agree at every
module (positive control); the legacy gradient-accumulation variant (mean of per-micro-batch means) parts in no module's
forward, only in the loss."""

from __future__ import annotations

from packcheck.harness.compare import ArmId
from packcheck.harness.compare.divergence import Where
from packcheck.harness.run.localise import localise, localise_verdict
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios import get_scenario


def test_packed_and_padded_rows_agree_at_every_module(packcheck_pool):
    found = localise(packcheck_pool.engine_info("hf_trainer", "cpu"), get_scenario("packed_vs_unpacked"),
                     setting_for("llama", "float32", "cpu"), ArmId("packed"), ArmId("unpacked"), packcheck_pool)
    assert found.where is Where.NOWHERE, found.sentence()
    labels = {p.label for p in found.forward}
    assert {"model.layers.0.self_attn.o_proj (input)", "model.norm", "lm_head"} <= labels, sorted(labels)
    assert found.backward, "the Trainer's own backward reached the hooks"


def test_legacy_gradient_accumulation_parts_in_the_loss(verdict_of, packcheck_pool):
    verdict = verdict_of("hf_trainer.legacy-ga", "microbatch_invariance", "llama", dtype="float32")
    assert verdict.failed, verdict.message()
    found = localise_verdict(packcheck_pool.engine_info("hf_trainer.legacy-ga", "cpu"), get_scenario("microbatch_invariance"),
                             setting_for("llama", "float32", "cpu"), verdict.comparisons, packcheck_pool)
    assert found.where is Where.LOSS, found.sentence()
    assert found.backward[found.first].label == "lm_head"
