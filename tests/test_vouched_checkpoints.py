"""A cache entry the parent harness process vouched for (harness/models/vouch.py) is taken by its hash, not checked
against its seed again; one changed since, or vouched for in a broken environment entry, is checked against its seed
and rebuilt as before."""

from __future__ import annotations

import json

import pytest

from packcheck.harness.models import cache_seal
from packcheck.harness.models import checkpoint as ckpt
from packcheck.harness.models import get_family
from packcheck.harness.models.vouch import VOUCHED, accept_vouched, vouching_env

SEED = 97


@pytest.fixture
def child(tmp_path, monkeypatch):
    """An entry this process wrote, vouched for in the environment, then forgotten as a child process has never held it."""
    monkeypatch.setenv("PACKCHECK_CACHE_DIR", str(tmp_path))
    entry = ckpt.checkpoint_for("llama", get_family("llama").config(), SEED)
    vouched = vouching_env()
    assert json.loads(vouched[VOUCHED])[entry] == cache_seal.digests(ckpt.Path(entry)), "the parent vouches with its own digests"
    monkeypatch.setenv(VOUCHED, vouched[VOUCHED])
    monkeypatch.setattr(cache_seal, "_held", {k: v for k, v in cache_seal._held.items() if k != entry})
    monkeypatch.setattr(cache_seal, "_checked", {})
    seed_checks = []
    monkeypatch.setattr(ckpt, "_verify", lambda target: seed_checks.append(str(target)))
    return entry, seed_checks


def test_a_vouched_entry_is_taken_by_its_hash_and_held_as_the_childs_own(child):
    entry, seed_checks = child
    assert cache_seal.expected(ckpt.Path(entry)) is None
    assert ckpt.checkpoint_for("llama", get_family("llama").config(), SEED) == entry
    assert seed_checks == [], "a vouched entry whose files hash to the vouched digests is not checked against its seed"
    assert cache_seal.expected(ckpt.Path(entry)) == cache_seal.digests(ckpt.Path(entry))


def test_an_entry_changed_since_it_was_vouched_for_is_checked_against_its_seed(child):
    entry, seed_checks = child
    with open(f"{entry}/model.safetensors", "r+b") as file:
        file.seek(-2, 2)
        file.write(b"\x00\x01")
    assert not accept_vouched(ckpt.Path(entry))
    ckpt.checkpoint_for("llama", get_family("llama").config(), SEED)
    assert seed_checks == [entry], "the seed check runs for an entry that no longer hashes to what was vouched"


@pytest.mark.parametrize("value", ["not json", "[1, 2]", '{"%s": "a string"}', "{}"])
def test_a_broken_or_silent_vouching_entry_vouches_for_nothing(child, monkeypatch, value):
    entry, seed_checks = child
    monkeypatch.setenv(VOUCHED, value.replace("%s", entry))
    assert not accept_vouched(ckpt.Path(entry))
    ckpt.checkpoint_for("llama", get_family("llama").config(), SEED)
    assert seed_checks == [entry]
