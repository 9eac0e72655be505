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


def test_a_package_installed_while_the_process_runs_is_found_by_the_next_lookup(tmp_path, monkeypatch):
    """The entry points are read once per installed state (registry._scan): a distribution that appears on sys.path
    afterwards, as `pip install` writes one, is seen at once, and gone again once it is removed."""
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "late_engine" not in engine_names()  # read with the folder on sys.path: the install below changes its state
    (tmp_path / "late_engine.py").write_text("from packcheck.impls.reference.engine import ReferenceEngine as LateEngine\n")
    info = tmp_path / "late_engine-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: late-engine\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[packcheck.engines]\nlate_engine = late_engine:LateEngine\n")
    assert "late_engine" in engine_names() and isinstance(resolve_engine("late_engine"), ReferenceEngine)
    monkeypatch.undo()
    assert "late_engine" not in engine_names()
