"""packcheck.guard (issue 46): the packed path checked inside a real transformers Trainer run on the CPU (a tiny Llama,
DataCollatorWithFlattening: padding-free packing), the run left bit for bit, a seeded packing bug caught on the first
batch with its module named and a case `packcheck replay` reruns, and the plain function on bugs of the count and the
loss's weighting."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import DataCollatorWithFlattening, Trainer, TrainingArguments

from packcheck.guard import Guard, GuardFailure, check
from packcheck.guard.batch import documents_of
from packcheck.guard.transformers_callback import PackingGuardCallback
from packcheck.harness.cli.main import main
from tests.guard.models import VOCAB, PositionsDroppedLlama, tiny

LENGTHS = (7, 1, 12, 5, 3, 9, 2, 6)


def documents(seed: int = 1, lengths=LENGTHS) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in lengths]


def flattened(docs) -> dict:
    return DataCollatorWithFlattening(return_tensors="pt")([{"input_ids": d} for d in docs])


def trainer(model, out, callbacks=(), steps: int = 3) -> Trainer:
    data = [{"input_ids": d} for d in documents(2) * 3]  # a list is a dataset to the Trainer (CI's env has no `datasets`)
    args = TrainingArguments(output_dir=str(out), per_device_train_batch_size=4, max_steps=steps, learning_rate=1e-2,
                             seed=7, data_seed=7, report_to=[], save_strategy="no", logging_steps=1, use_cpu=True,
                             dataloader_num_workers=0, disable_tqdm=True)
    return Trainer(model=model, args=args, train_dataset=data, data_collator=DataCollatorWithFlattening(), callbacks=list(callbacks))


def test_the_guard_passes_a_correct_trainer_run_and_leaves_it_bit_for_bit(tmp_path):
    """Guard on and off: the same weights to the bit and the same logged losses; the guard checked the first batch.
    Dropout is on, so a check that moved the random generators would show in the weights."""
    runs = {}
    for on in (False, True):
        model = tiny(dropout=0.1)
        callback = PackingGuardCallback(case_dir=tmp_path / "cases")
        t = trainer(model, tmp_path / f"run{on}", [callback] if on else [])
        t.train()
        runs[on] = ({k: v.clone() for k, v in model.state_dict().items()}, [h["loss"] for h in t.state.log_history if "loss" in h])
        if on:
            verdicts = callback.guard.verdicts  # the first batch, and each later one that grew the regime
            assert verdicts and all(v.passed for v in verdicts), [v.message() for v in verdicts]
            verdict = verdicts[0]
            assert {c.quantity for c in verdict.comparisons} == {"num_loss_tokens", "loss", "logprobs", "grad"}
            assert any(c.item == "num_items_in_batch" for c in verdict.comparisons), "the Trainer's normaliser is checked"
    (weights_off, losses_off), (weights_on, losses_on) = runs[False], runs[True]
    assert losses_on == losses_off and len(losses_on) == 3
    assert all(torch.equal(weights_on[k], weights_off[k]) for k in weights_off)


def test_a_seeded_packing_bug_is_caught_on_the_first_batch_with_its_module_and_a_case_that_replays(tmp_path, capsys):
    t = trainer(tiny(PositionsDroppedLlama), tmp_path / "run", [PackingGuardCallback(case_dir=tmp_path / "cases")])
    with pytest.raises(GuardFailure) as failure:
        t.train()
    verdict = failure.value.verdict
    assert t.state.global_step == 0, "caught before the first optimizer step"
    assert "first divergent module: model.rotary_emb" in verdict.where
    assert verdict.diagnosis.startswith("the packed forward differs from the documents run alone")
    assert len(verdict.documents) == 2, "shrunk to the least that still fails: two documents"
    case = json.loads(open(verdict.case_file).read())
    assert case["model"]["class"] == "tests.guard.models:PositionsDroppedLlama"
    capsys.readouterr()
    assert main(["replay", verdict.case_file]) == 1
    assert "first divergent module: model.rotary_emb" in capsys.readouterr().out


def test_a_label_across_a_document_boundary_is_a_wrong_count(tmp_path):
    """A collator that does not mask each document's first label: the packed loss trains a document's last token to
    predict the next document's first, a target no document has."""
    batch = flattened(documents())
    batch["labels"] = batch["input_ids"].clone()
    with pytest.raises(GuardFailure) as failure:
        check(tiny(), batch, shrink=False, localise=False, case_dir=tmp_path)
    verdict = failure.value.verdict
    count = next(c for c in verdict.comparisons if c.quantity == "num_loss_tokens" and not c.item)
    assert not count.passed and count.observed == len(LENGTHS) - 1
    assert verdict.diagnosis.startswith("the loss counts other targets")


def per_document_mean(model, batch):
    """A loss bug: each document's mean, averaged over documents (not the tokens' sum over their count)."""
    out = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"])
    logits = out.logits[0].float()
    losses = []
    for d in documents_of(batch):
        target = batch["labels"][0, d.start + 1:d.end]
        if (target != -100).any():
            losses.append(torch.nn.functional.cross_entropy(logits[d.start:d.end - 1], target, ignore_index=-100))
    out.loss = torch.stack(losses).mean()
    return out  # with its logits: the log-probs are compared (and agree), so the diagnosis can single out the weighting


def test_a_loss_weighted_per_document_is_caught_as_weighting(tmp_path):
    with pytest.raises(GuardFailure) as failure:
        check(tiny(), flattened(documents()), step=per_document_mean, shrink=False, localise=False, case_dir=tmp_path)
    verdict = failure.value.verdict
    assert {c.quantity for c in verdict.comparisons if not c.passed} >= {"loss", "grad"}
    assert verdict.diagnosis.startswith("the log-probs agree but the loss does not")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_the_plain_function_passes_a_correct_model_in_every_dtype(dtype):
    verdict = check(tiny(dtype=dtype), flattened(documents()))
    assert verdict.passed, verdict.message()
    assert 0 < verdict.worst.margin < 1


def test_warn_mode_reports_and_goes_on(tmp_path):
    guard = Guard(on_failure="warn", shrink=False, localise=False, case_dir=tmp_path)
    with pytest.warns(UserWarning, match="packcheck guard: FAIL"):
        verdict = guard(tiny(PositionsDroppedLlama), flattened(documents()))
    assert not verdict.passed


def test_which_batches_are_checked_the_first_and_those_that_grow():
    guard = Guard(first=1)
    model = tiny()
    small, longer = flattened(documents(1, (4, 5))), flattened(documents(1, (4, 20)))
    assert guard(model, small) is not None
    assert guard(model, small) is None, "not the first, and no larger"
    assert guard(model, longer) is not None, "a longer document: checked again"
    assert guard(model, longer) is None


def test_documents_are_read_from_position_resets_padding_and_cu_seqlens():
    batch = flattened(documents(1, (3, 4, 2)))
    assert [(d.start, d.end) for d in documents_of(batch)] == [(0, 3), (3, 7), (7, 9)]
    padded = {"input_ids": torch.zeros(2, 5, dtype=torch.long), "labels": torch.zeros(2, 5, dtype=torch.long),
              "attention_mask": torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0]])}
    assert [(d.row, d.start, d.end) for d in documents_of(padded)] == [(0, 2, 5), (1, 0, 4)]
    varlen = {"input_ids": torch.zeros(1, 9, dtype=torch.long), "labels": torch.zeros(1, 9, dtype=torch.long),
              "cu_seq_lens_q": torch.tensor([0, 3, 7, 9], dtype=torch.int32)}
    assert [d.length for d in documents_of(varlen)] == [3, 4, 2]


def test_what_a_check_touches_is_put_back_bit_for_bit():
    """untouched(): the gradients (the very tensors), the buffers, each module's mode and the random generators."""
    import random

    from packcheck.guard.state import untouched

    model = tiny(dropout=0.1)
    model.train()
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    grads = {n: p.grad for n, p in model.named_parameters()}
    copies = {n: g.clone() for n, g in grads.items()}
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    random.seed(0), torch.manual_seed(0)
    state = (random.getstate(), torch.get_rng_state())
    with untouched(model):
        model.eval()
        assert all(p.grad is None for p in model.parameters()), "a check starts from no gradient"
        model(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
        torch.rand(5), random.random()
        for b in model.buffers():
            b.add_(1)
    assert (random.getstate(), torch.equal(torch.get_rng_state(), state[1])) == (state[0], True)
    assert all(model.get_parameter(n).grad is g and torch.equal(g, copies[n]) for n, g in grads.items())
    assert all(torch.equal(b, buffers[n]) for n, b in model.named_buffers()) and model.training


def test_data_parallel_ranks_check_their_own_documents_and_the_group_count(tmp_path):
    """Two gloo ranks under torch's launcher, uneven documents. The DP group's count as num_items_in_batch passes; each
    rank's own count (every rank normalising by its own targets) fails on both; a bug in rank 1's batch alone fails
    there, and rank 0, whose own check passed, stops too (the verdict is agreed: no rank trains on)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root.parent), str(root), os.environ.get("PYTHONPATH")]))}
    modes = ["right", "rank-count", "rank1-label"]
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(root / "tests/guard/dp_worker.py"), str(tmp_path), *modes], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for mode in modes:
        ranks = [json.loads((tmp_path / f"{mode}-rank{r}.json").read_text()) for r in (0, 1)]
        failing = [[c["quantity"] + ("/" + c["item"] if c["item"] else "") for c in v["comparisons"] if not c["passed"]] for v in ranks]
        if mode == "right":
            assert all(v["passed"] and not v["raised"] for v in ranks), failing
            assert all(any(c["item"] == "num_items_in_batch" and "2 ranks" in c["where"] for c in v["comparisons"]) for v in ranks)
        elif mode == "rank-count":
            assert all("num_loss_tokens/num_items_in_batch" in f for f in failing) and all(v["raised"] for v in ranks), failing
        else:
            assert failing[0] == [] and ranks[0]["raised"] and "another rank's check failed" in ranks[0]["notes"]
            assert "num_loss_tokens" in failing[1] and ranks[1]["raised"]


def test_the_oracle_copy_takes_neither_hooks_nor_what_they_hold_and_leaves_them_on_the_model():
    """A hook closing over a trainer or an optimizer's state must not be deep-copied with the model (it could be as large
    as the optimizer); the model keeps its hooks."""
    from packcheck.guard.runs import oracle_model

    class Uncopyable:
        def __deepcopy__(self, memo):
            raise AssertionError("the oracle's copy reached what a hook holds")

    class Trainer:  # a hook is often a bound method: a deep copy copies its object (functions it leaves alone)
        state = None

        def before_forward(self, module, args):
            return None

    trainer = Trainer()
    trainer.state = Uncopyable()
    model = tiny()
    handle = model.register_forward_pre_hook(trainer.before_forward)
    twin = oracle_model(model, torch.float64)
    assert next(twin.parameters()).dtype == torch.float64 and not twin._forward_pre_hooks
    assert list(model._forward_pre_hooks) == [handle.id]
