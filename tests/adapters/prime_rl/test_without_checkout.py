"""What of the prime_rl adapter holds without a prime-rl checkout: the CPU varlen stand-in, checked
against attention written out by hand (so the stand-in cannot hide a boundary bug of prime-rl's), and
the clear refusal when PACKCHECK_PRIME_RL_SRC is unset."""

from __future__ import annotations

import pytest
import torch

from packcheck.impls.adapters.prime_rl import source
from packcheck.impls.adapters.prime_rl.varlen import flash_attn_varlen_func

DOCS = (5, 1, 7, 3)  # document lengths in one packed row, one of a single token


def dense_block_causal(q_THD, k_THD, v_THD, lengths, scale):
    """softmax(q k^T * scale + mask) v over the whole row, the mask allowing j <= i within a document only."""
    T = q_THD.shape[0]
    doc = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    allowed = (doc[:, None] == doc[None, :]) & torch.ones(T, T, dtype=torch.bool).tril()
    groups = q_THD.shape[1] // k_THD.shape[1]
    k = k_THD.repeat_interleave(groups, dim=1)
    v = v_THD.repeat_interleave(groups, dim=1)
    scores_HTT = torch.einsum("thd,shd->hts", q_THD, k) * scale
    scores_HTT = scores_HTT.masked_fill(~allowed, float("-inf"))
    return torch.einsum("hts,shd->thd", scores_HTT.softmax(-1), v)


def case_tensors(seed=0, heads=4, kv_heads=2, dim=8):
    g = torch.Generator().manual_seed(seed)
    T = sum(DOCS)
    make = lambda h: torch.randn(T, h, dim, generator=g, dtype=torch.float64)  # noqa: E731
    cu = torch.tensor([0, *torch.tensor(DOCS).cumsum(0).tolist()], dtype=torch.int32)
    return make(heads), make(kv_heads), make(kv_heads), cu


def test_varlen_stand_in_is_block_diagonal_causal_attention():
    q, k, v, cu = case_tensors()
    got = flash_attn_varlen_func(q, k, v, cu, cu, max(DOCS), max(DOCS), causal=True, softmax_scale=0.3)
    want = dense_block_causal(q, k, v, DOCS, 0.3)
    assert (got - want).abs().max() < 1e-14


def test_varlen_stand_in_keeps_documents_apart():
    """Changing document 0 changes nothing of the others: no boundary leaks through the stand-in."""
    q, k, v, cu = case_tensors()
    k2, v2 = k.clone(), v.clone()
    k2[: DOCS[0]] += 1.0
    v2[: DOCS[0]] -= 1.0
    a = flash_attn_varlen_func(q, k, v, cu, cu, 7, 7, causal=True)
    b = flash_attn_varlen_func(q, k2, v2, cu, cu, 7, 7, causal=True)
    assert torch.equal(a[DOCS[0]:], b[DOCS[0]:])
    assert not torch.equal(a[: DOCS[0]], b[: DOCS[0]])


@pytest.mark.parametrize("kwargs", [dict(causal=False), dict(causal=True, dropout_p=0.1), dict(causal=True, window_size=(3, 0))])
def test_varlen_stand_in_refuses_what_it_does_not_compute(kwargs):
    q, k, v, cu = case_tensors()
    with pytest.raises(NotImplementedError):
        flash_attn_varlen_func(q, k, v, cu, cu, 7, 7, **kwargs)


def test_without_the_checkout_the_engine_says_which_variable_to_set(monkeypatch):
    monkeypatch.delenv(source.ENV_VAR, raising=False)
    assert source.ENV_VAR in source.skip_reason()
    from packcheck.impls.adapters.prime_rl.engine import PrimeRL

    with pytest.raises(source.PrimeRlSourceMissing, match=source.ENV_VAR):
        PrimeRL()


def test_a_folder_that_is_not_a_checkout_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv(source.ENV_VAR, str(tmp_path))
    assert "is not a prime-rl checkout" in source.skip_reason()
