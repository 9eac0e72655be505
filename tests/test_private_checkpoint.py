"""A launch copies the checkpoint once and hands every case that copy as it was copied: a case that changes anything
there (a write in place, a truncation, a new or removed file, a rename) gets the next case a fresh copy; the cache
is never handed out. Non-finite values are found by one min/max reduction (harness/engines/validate.py, all_finite)."""

from __future__ import annotations

import os

import pytest
import torch

from packcheck.harness.engines.validate import all_finite
from packcheck.harness.launch.private_checkpoint import PrivateCheckpoint


@pytest.fixture
def cache(tmp_path):
    source = tmp_path / "cache"
    source.mkdir()
    (source / "model.safetensors").write_bytes(b"weights" * 100)
    (source / "config.json").write_text("{}")
    return source


def contents(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


TAMPERING = {
    "overwritten in place": lambda d: (d / "model.safetensors").write_bytes(b"poison"),
    "same size in place": lambda d: (d / "model.safetensors").write_bytes(b"WEIGHTS" * 100),
    "file added": lambda d: (d / "converted.bin").write_bytes(b"x"),
    "file removed": lambda d: (d / "config.json").unlink(),
    "renamed over": lambda d: ((d / "other").write_bytes(b"weights" * 100), os.replace(d / "other", d / "model.safetensors")),
    "mode changed": lambda d: os.chmod(d / "model.safetensors", 0o600),
}


@pytest.mark.parametrize("tamper", list(TAMPERING), ids=list(TAMPERING))
def test_a_case_that_changes_its_copy_gets_the_next_one_a_fresh_copy(tmp_path, cache, tamper):
    private = PrivateCheckpoint(tmp_path / "launch" / "checkpoint")
    copy = private.for_case(str(cache))
    assert copy != cache and contents(copy) == contents(cache)
    TAMPERING[tamper](copy)
    assert private.for_case(str(cache)) == copy and contents(copy) == contents(cache)
    assert contents(cache) == {"config.json": b"{}", "model.safetensors": b"weights" * 100}, "the cache is never touched"


def test_an_untouched_copy_is_handed_on_and_another_model_replaces_it(tmp_path, cache):
    private = PrivateCheckpoint(tmp_path / "launch" / "checkpoint")
    inode = private.for_case(str(cache)).joinpath("model.safetensors").stat().st_ino
    assert private.for_case(str(cache)).joinpath("model.safetensors").stat().st_ino == inode, "not copied again"
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.safetensors").write_bytes(b"other")
    assert contents(private.for_case(str(other))) == {"model.safetensors": b"other"}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_all_finite_finds_any_nan_or_inf_anywhere(dtype, bad):
    for index in (0, 37, 99):
        t = torch.randn(100, dtype=torch.float64).to(dtype)
        assert all_finite(t)
        t[index] = bad
        assert not all_finite(t) and not all_finite(t.view(10, 10).t())
    assert all_finite(torch.zeros(0, dtype=dtype))
