"""The one piece of packaging pyproject.toml cannot say: the repository's top-level folders
(harness/, impls/, conformance/, fixtures/) install under the single `packcheck` namespace
(packcheck.harness, packcheck.impls, ...), so nothing named `harness` or `impls` lands at the top of
site-packages. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

FOLDERS = ("harness", "impls", "conformance", "fixtures")

setup(
    packages=[f"packcheck.{name}" for folder in FOLDERS for name in find_packages(include=[folder, f"{folder}.*"])],
    package_dir={f"packcheck.{folder}": folder for folder in FOLDERS},
)
