"""The one piece of packaging pyproject.toml cannot say: the repository's top-level folders
(harness/, impls/, conformance/, fixtures/) install under the single `packcheck` namespace
(packcheck.harness, packcheck.impls, ...), so nothing named `harness` or `impls` lands at the top of
site-packages. And the commit the package is built from: an installed copy has no .git beside it, so
the build writes the checkout's commit into it (harness/provenance.py, BUILD_COMMIT) for every run's provenance."""

import importlib.util
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

FOLDERS = ("harness", "impls", "conformance", "fixtures", "guard")
HERE = Path(__file__).resolve().parent


def _provenance():
    """harness/provenance.py loaded by path: it imports nothing of packcheck, which is not installed while it builds."""
    spec = importlib.util.spec_from_file_location("packcheck_build_provenance", HERE / "harness" / "provenance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildWithCommit(build_py):
    """build_py, then the checkout's commit (<sha>[+dirty]) into packcheck/harness/ of the build; nothing where the source
    is not a git checkout (an sdist)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install runs from the checkout, whose .git answers
            return
        provenance = _provenance()
        commit = provenance.git_commit(HERE)
        if commit != provenance.UNKNOWN:
            target = Path(self.build_lib) / "packcheck" / "harness" / provenance.BUILD_COMMIT
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(commit + "\n", encoding="utf-8")


setup(
    packages=[f"packcheck.{name}" for folder in FOLDERS for name in find_packages(include=[folder, f"{folder}.*"])],
    package_dir={f"packcheck.{folder}": folder for folder in FOLDERS},
    cmdclass={"build_py": BuildWithCommit},
)
