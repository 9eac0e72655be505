"""packcheck.guard in TRL's SFTTrainer with padding_free=True (docs/guard.md): the same callback as the Trainer's passes a
correct run and catches the seeded positions-dropped port on the first batch (runs where trl is installed: nox -s trl)."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from trl import SFTConfig, SFTTrainer

from packcheck.guard import GuardFailure
from packcheck.guard.transformers_callback import PackingGuardCallback
from packcheck.impls.adapters.hf_common.tokenizer import tokenizer_for
from tests.guard.models import VOCAB, PositionsDroppedLlama, drop_boundaries, tiny


def sft(model, tmp_path) -> tuple[SFTTrainer, PackingGuardCallback]:
    g = torch.Generator().manual_seed(3)
    data = Dataset.from_dict({"input_ids": [torch.randint(1, VOCAB, (n,), generator=g).tolist() for n in (9, 3, 14, 6, 2, 11, 5, 8)]})
    callback = PackingGuardCallback(case_dir=tmp_path / "cases")
    config = SFTConfig(output_dir=str(tmp_path / "out"), padding_free=True, packing=False, max_length=None, max_steps=2,
                       per_device_train_batch_size=4, learning_rate=1e-3, report_to=[], save_strategy="no", use_cpu=True,
                       disable_tqdm=True)
    return SFTTrainer(model=model, args=config, train_dataset=data, processing_class=tokenizer_for(VOCAB), callbacks=[callback]), callback


def test_the_guard_passes_trl_padding_free_sft(tmp_path):
    trainer, callback = sft(tiny(), tmp_path)
    trainer.train()
    assert callback.guard.verdicts and all(v.passed for v in callback.guard.verdicts), [v.message() for v in callback.guard.verdicts]
    assert len(callback.guard.verdicts[0].documents) == 4, "the padding-free row of 4 documents was checked as 4 documents"


def test_under_trl_a_port_dropping_positions_on_top_is_bypassed_and_one_dropping_boundaries_inside_is_caught(tmp_path):
    """TRL's padding_free batch carries cu_seq_lens beside position_ids, and with fused_lm_head TRL runs the decoder and
    its own head, not the causal LM's forward: a port that drops position_ids there is never called, and the run is right
    (the guard passes, rightly). Dropped inside the decoder, the row is one causal sequence: caught."""
    trainer, callback = sft(tiny(PositionsDroppedLlama), tmp_path / "top")
    trainer.train()
    assert all(v.passed for v in callback.guard.verdicts)
    model = tiny()
    drop_boundaries(model)
    trainer, _ = sft(model, tmp_path / "inside")
    with pytest.raises(GuardFailure) as failure:
        trainer.train()
    verdict = failure.value.verdict
    assert verdict.diagnosis.startswith("the loss differs from the documents run alone; the step returned no logits")
    assert "first divergent module: model.rotary_emb" in verdict.where
    assert len(verdict.documents) < 4 and not any(n.startswith("not shrunk") for n in verdict.notes), "TRL's batch is shrunk too"
