"""The reference trainer end to end on a slice of the stdlib corpus: a few steps lower the loss,
the corpus is a pure function of its seed, and the saved checkpoint is a valid HF checkpoint.

The config is tiny (one layer, width 32) so the whole file runs in a few seconds on two CPU cores.
"""

from __future__ import annotations

import json
from itertools import islice

import pytest
import torch

from packcheck.impls.reference.model import CausalLM
from packcheck.impls.reference.train.corpus import split_corpus
from packcheck.impls.reference.train.trainer import TrainConfig, train

pytestmark = pytest.mark.xdist_group("train")  # run (a training run), shared by three tests: one worker runs it once

SLICE = 60  # first stdlib files, sorted: the split keeps ~10% of them for validation
TINY = TrainConfig(
    hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
    steps=8, warmup=2, lr=1e-2, seq_len=128, max_len=100, batch_tokens=768, micro_batches=3,
    eval_every=8, val_tokens=1024, max_files=SLICE,
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    lines: list[str] = []
    return train(TINY, out, log=lines.append), out, lines


def first_batches(seed: int, n: int = 3) -> list:
    train_corpus, _ = split_corpus(max_files=SLICE)
    return list(islice(train_corpus.batches(seed, 768), n))


def test_same_seed_same_samples():
    assert first_batches(seed=0) == first_batches(seed=0)
    assert first_batches(seed=0) != first_batches(seed=1)
    _, val_a = split_corpus(max_files=SLICE)
    _, val_b = split_corpus(max_files=SLICE)
    assert val_a.first_samples(1024, seed=0) == val_b.first_samples(1024, seed=0)


def test_samples_are_byte_documents_with_every_token_but_the_first_in_the_loss():
    for sample in first_batches(seed=0, n=1)[0]:
        assert 2 <= len(sample.input_ids) <= 400 and all(0 <= t < 256 for t in sample.input_ids)
        assert sample.loss_mask == (0,) + (1,) * (len(sample.input_ids) - 1)


def test_loss_falls_over_a_few_steps(run):
    curve, _, lines = run
    steps = curve["points"][1:]
    val = [p["val_loss"] for p in curve["points"] if "val_loss" in p]
    print("\n" + "\n".join(lines))
    assert steps[-1]["train_loss"] < steps[0]["train_loss"]
    assert val[-1] < val[0]


def test_micro_batches_have_uneven_token_counts(run):
    curve, _, _ = run
    assert any(len(set(p["micro_batch_tokens"])) > 1 for p in curve["points"][1:])


def test_saved_checkpoint_loads_in_transformers_with_the_same_logits(run):
    from transformers import AutoModelForCausalLM

    curve, out, _ = run
    assert json.loads((out / "curve.json").read_text())["points"] == json.loads(json.dumps(curve["points"]))
    ours = CausalLM.from_checkpoint(str(out), torch.float32)
    hf = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="sdpa")
    input_ids_1T = torch.tensor([list(b"def f(x):\n    return x + 1\n")])
    T = input_ids_1T.shape[1]
    with torch.no_grad():
        ours_logits = ours(input_ids_1T, torch.arange(T)[None], torch.zeros(1, T, dtype=torch.long))
        hf_logits = hf(input_ids=input_ids_1T, use_cache=False).logits
    assert (ours_logits - hf_logits).abs().max().item() <= 1e-5
