"""The edge shapes of this year's public packing bugs are in the fixed sample sets every scenario draws from, and the
hypothesis strategies draw them often: a change to a set that drops one fails here, not silently in coverage."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from packcheck.harness.contract.rows import pack_in_order
from packcheck.harness.data.samples import CP_CUTS, CP_CUTS_SEQ_LEN, MIXED_DOCUMENTS, SKEWED_LENGTHS
from packcheck.harness.data.strategies import EDGE_LENGTHS, samples
from packcheck.harness.scenarios.linear_attention_reset import DOCUMENTS as RESET_DOCUMENTS

SHORT_CONV_WIDTH = 4  # the hybrid family's linear_conv_kernel_dim (harness/models/families.py)
SETS = {"MIXED_DOCUMENTS": (MIXED_DOCUMENTS, 48), "SKEWED_LENGTHS": (SKEWED_LENGTHS, 48), "CP_CUTS": (CP_CUTS, CP_CUTS_SEQ_LEN)}


def one_token_before_another(spec, seq_len: int) -> bool:
    """A 1-token document with another document right after it in the same packed row (ms-swift #9903)."""
    rows = pack_in_order([length for length, _ in spec], seq_len)
    return any(spec[a][0] == 1 for row in rows for a, _ in zip(row, row[1:]))


def trained_shorter_than_the_conv(spec) -> bool:
    """A document shorter than the short convolution's width less one that carries a target (flash-linear-attention #1140)."""
    return any(length < SHORT_CONV_WIDTH - 1 and kind != "none" for length, kind in spec)


@pytest.mark.parametrize("name", list(SETS))
def test_a_one_token_document_precedes_another_in_its_row(name):
    spec, seq_len = SETS[name]
    assert one_token_before_another(spec, seq_len), f"{name}: no 1-token document is followed by another in its packed row"


@pytest.mark.parametrize("name, spec", [("MIXED_DOCUMENTS", MIXED_DOCUMENTS), ("linear_attention_reset", RESET_DOCUMENTS)])
def test_the_hybrid_family_trains_a_document_shorter_than_its_convolution(name, spec):
    assert trained_shorter_than_the_conv(spec), f"{name}: no trained document shorter than {SHORT_CONV_WIDTH - 1} tokens"


def test_context_parallel_rows_hold_lengths_no_shard_count_divides():
    lengths = [length for length, _ in CP_CUTS]
    assert any(length % 4 for length in lengths) and any(length % 2 for length in lengths)


@settings(max_examples=50, derandomize=True, deadline=None)
@given(samples(vocab_size=128))
def test_drawn_samples_train_a_prediction_from_two_tokens_or_more(drawn):
    """The strategy's guarantee (see its docstring): some target at t >= 2."""
    assert any(t >= 2 and m for s in drawn for t, m in enumerate(s.loss_mask))


def test_the_strategy_draws_edge_lengths_often():
    seen = []

    @settings(max_examples=50, derandomize=True, deadline=None)
    @given(samples(vocab_size=128))
    def collect(drawn):
        seen.extend(len(s.input_ids) for s in drawn)

    collect()
    share = sum(length in EDGE_LENGTHS for length in seen) / len(seen)
    assert share > 0.25, f"edge lengths are {share:.0%} of the drawn documents"

