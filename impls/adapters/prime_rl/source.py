"""Where the prime-rl source comes from: a checkout named by an environment variable, never code
committed here (prime-rl is not on PyPI).

    PACKCHECK_PRIME_RL_SRC=/path/to/prime-rl   # a clone of github.com/PrimeIntellect-ai/prime-rl

`load()` puts the checkout's two source roots on sys.path (`src/` with the trainer, and
`packages/prime-rl-configs/src/` with the pydantic configs; `prime_rl` is a namespace package
spread over both), installs the CPU stand-ins (cpu_stubs.py) and returns the checkout. Without the
variable every entry point says so and stops: `skip_reason()` is the sentence the tests and the nox
session skip with.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from packcheck.harness.engines.registry import EngineNotFound

ENV_VAR = "PACKCHECK_PRIME_RL_SRC"
TESTED_COMMIT = "559b44772e471d1538537b8805cc77f3824a5e64"  # the snapshot docs/findings.md was measured at
ROOTS = ("src", "packages/prime-rl-configs/src")


class PrimeRlSourceMissing(EngineNotFound):
    """PACKCHECK_PRIME_RL_SRC is unset or does not name a prime-rl checkout: the engine is not loadable here, as an
    adapter whose extra is not installed (`packcheck list engines` says so, `packcheck run` stops with the reason)."""


def skip_reason() -> str | None:
    """Why prime-rl cannot be loaded here, or None when the checkout is usable."""
    where = os.environ.get(ENV_VAR)
    if not where:
        return (f"{ENV_VAR} is not set: point it at a prime-rl checkout (git clone https://github.com/PrimeIntellect-ai/prime-rl; "
                f"measured at {TESTED_COMMIT[:9]}) and install the extra: pip install -e '.[test,prime-rl]'")
    missing = [root for root in ROOTS if not (Path(where) / root / "prime_rl").is_dir()]
    if missing:
        return f"{ENV_VAR}={where} is not a prime-rl checkout: {', '.join(f'{r}/prime_rl' for r in missing)} not found"
    return None


def checkout() -> Path:
    reason = skip_reason()
    if reason is not None:
        raise PrimeRlSourceMissing(reason)
    return Path(os.environ[ENV_VAR]).resolve()


@functools.cache
def commit() -> str:
    """The checkout's commit (recorded in every StepResult's notes), or why it is unknown."""
    try:
        return subprocess.run(["git", "-C", str(checkout()), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (the checkout has no git metadata)"


@functools.cache
def load() -> Path:
    """Make `import prime_rl...` resolve to the checkout, with the CPU stand-ins in place; idempotent."""
    root = checkout()
    for sub in reversed(ROOTS):
        path = str(root / sub)
        if path not in sys.path:
            sys.path.insert(0, path)
    from packcheck.impls.adapters.prime_rl import cpu_stubs

    cpu_stubs.install(root)
    return root
