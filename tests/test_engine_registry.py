"""Engines resolve from registered names, entry points and "module:Class"; mistakes are explained."""

from __future__ import annotations

import pytest

from packcheck.harness.engines import Engine, EngineNotFound, engine_names, mutant_names, resolve_engine
from packcheck.impls.reference.engine import ReferenceEngine


def test_registered_names_include_the_reference_and_every_bug():
    assert "reference" in engine_names()
    assert {n.removeprefix("mutant.") for n in mutant_names()} >= {
        "cross-doc-attention", "positions-not-reset", "boundary-label", "pad-in-loss", "tail-pack-dropped",
        "const-microbatch-scale", "ga-mean-of-means", "mask-slice-misalign",
    }


def test_a_registered_mutant_carries_the_bug_it_is_named_after():
    """Mutants are told apart by registration (the packcheck.mutants group), and each says its bug as data."""
    for name in mutant_names():
        bug = resolve_engine(name).bug
        assert bug is not None and name == f"mutant.{bug}", name
    assert resolve_engine("reference").bug is None and not set(mutant_names()) - set(engine_names())


def test_resolve_by_name_class_path_class_and_instance():
    assert isinstance(resolve_engine("reference"), ReferenceEngine)
    assert isinstance(resolve_engine("packcheck.impls.reference.engine:ReferenceEngine"), ReferenceEngine)
    assert isinstance(resolve_engine(ReferenceEngine), ReferenceEngine)
    instance = ReferenceEngine()
    assert resolve_engine(instance) is instance


def test_unknown_name_suggests_near_matches():
    with pytest.raises(EngineNotFound, match="did you mean reference"):
        resolve_engine("refrence")


@pytest.mark.parametrize(("spec", "message"), [
    ("no_such_module_xyz:Engine", "cannot import module"),
    ("packcheck.impls.reference.engine:Nope", "has no attribute 'Nope'"),
    ("packcheck.harness.contract:Sample", "not a subclass of packcheck.harness.engines.Engine"),
])
def test_bad_class_paths_are_explained(spec, message):
    with pytest.raises(EngineNotFound, match=message):
        resolve_engine(spec)


def test_engine_must_implement_run():
    class Half(Engine):
        name = "half"

    with pytest.raises(TypeError, match="run"):
        Half()


def test_a_class_path_resolves_from_the_current_directory(tmp_path, monkeypatch):
    # the `packcheck` console script does not put the working directory on sys.path; `python -m` does
    (tmp_path / "my_adapter_in_cwd.py").write_text(
        "from packcheck.impls.reference.engine import ReferenceEngine\n\nclass MyEngine(ReferenceEngine):\n    name = 'mine'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(tmp_path))])
    assert resolve_engine("my_adapter_in_cwd:MyEngine").name == "mine"
