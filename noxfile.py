"""nox sessions: `nox --list` shows them; every session forwards its posargs to pytest or packcheck.

Uses the virtualenv backend with pip: uv does not see the CPU build of torch that lies on local
disk on the CPU machines. GPU sessions run in the current environment (python=False) because GPU
runners bring their own torch.
"""

from __future__ import annotations

import glob
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import nox

nox.options.default_venv_backend = "virtualenv"

CPU_TORCH = "torch==2.13.0"


def install(session: nox.Session, extras: str = "test") -> None:
    session.install(CPU_TORCH)
    session.install("-e", f".[{extras}]", "-c", "constraints/cpu-torch.txt")
    # An editable install leaves packcheck's own modules uncompiled, and where PYTHONDONTWRITEBYTECODE is set (the CI
    # machines) every interpreter the session starts compiled them again: 0.45 s of CPU each (the CLI, the pytest
    # processes, the zygotes). Compiled once here, they are read by all.
    session.run("python", "-m", "compileall", "-q", "harness", "impls", "conformance", "tests", silent=True)


# pytest-xdist over the cores, one worker more than there are (at most 4: each holds torch, and distributed tests start
# ranks of their own): the tests wait too (hangs waited out, processes starting), and on 2 cores 2 workers kept 1.3 of
# them busy; 3 workers took the default run from 785 s to 725 s (2026-12-07, idle). 4 workers were tried after issue 42:
# 533 s against 565 s back to back, but 581 s in the next fresh clone, within this machine's run-to-run spread, so 3
# stay. loadgroup keeps each reference cell's tests on one worker, which runs the cell once (conftest.py).
PARALLEL = ("--numprocesses", str(min(4, (os.cpu_count() or 1) + 1)), "--dist", "loadgroup")


@nox.session
def tests(session: nox.Session) -> None:
    """Unit tests, the conformance suite against the reference and the mutant proof (float64, CPU, every core)."""
    install(session)
    run_tests(session)


def run_tests(session: nox.Session) -> None:
    session.run(*tests_command(session))


def tests_command(session: nox.Session) -> list[str]:
    return ["pytest", *PARALLEL, "-m", "not slow", "--durations=25", *session.posargs]  # the slowest, for the CI budget


@nox.session(default=False)
def slow(session: nox.Session) -> None:
    """The long matrices kept out of the default CI run (tests marked slow), e.g. every family on another CPU kernel path."""
    install(session)
    session.run("pytest", *PARALLEL, "-m", "slow", *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """The conformance suite against any engine, from the installed package: PACKCHECK_ENGINE_INSTALL=/path/to/pkg nox -s conformance -- --engine NAME."""
    install(session)
    # the session's environment is its own: the engine's package must be installed into it too
    engine_package = os.environ.get("PACKCHECK_ENGINE_INSTALL")
    if engine_package:
        session.install("-e", engine_package, "-c", "constraints/cpu-torch.txt")
    session.run("pytest", "--pyargs", "packcheck.conformance", *session.posargs)


@nox.session
def package(session: nox.Session) -> None:
    """The built wheel as an engine's CI installs it: a fresh venv outside the checkout, the plugin, goldens as package data."""
    session.run(*wheel_check(session))


def wheel_check(session: nox.Session, *options: str) -> list[str]:
    """Build the wheel; the command that checks it (tests/installed/check_wheel.py, with `options`). The wheel, and the
    check's scratch directory, venv and site-packages, lie outside the checkout, as in an engine's CI: not in
    session.create_tmp(), which would point TMPDIR into the checkout for every later command of the session (the tests' too)."""
    wheels = tempfile.mkdtemp(prefix="packcheck-wheel-")
    session.install("setuptools>=69")
    session.run("pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, ".")
    return ["python", "tests/installed/check_wheel.py", *options, *glob.glob(os.path.join(wheels, "packcheck-*.whl"))]


@nox.session
def mutants(session: nox.Session) -> None:
    """Run the reference and every mutant through `packcheck run`, with an HTML report in reports/mutants."""
    install(session)
    session.run("packcheck", "run", "--engine", "reference", "mutant.*", "--out", "reports/mutants", *session.posargs, success_codes=[0, 1])


# Third-party engines, each in its own pinned environment: session -> (its pyproject extra, the engines it
# registers with the dtype each is judged in). Engines named without a dot are adapters (tests/adapters/NAME);
# dotted ones are their variants, which reproduce the adapter's known findings. TRL's two trainers share one env. float32
# where the engine cannot compute in float64: transformers' and TRL's losses cast logits to float32, verl's
# PrecisionType knows fp16/bf16/fp32 only (docs/findings.md).
ADAPTERS: dict[str, tuple[str, dict[str, str]]] = {
    "hf_trainer": ("hf", {"hf_trainer": "float32", "hf_trainer.legacy-ga": "float32", "hf_trainer.use-cache": "float32",
                          "hf_trainer.float64": "float64", "hf_trainer.qwen3_5": "float32",
                          "hf_trainer.moe": "float32", "hf_trainer.rank-token-count": "float32"}),
    "trl": ("trl", {"trl_sft": "float32", "trl_grpo": "float32", "trl_grpo.per-micro-batch": "float32"}),
    # transformers' own TP (DTensor) on 2 gloo ranks, judged on its functional collectives (docs/adapters.md, hf_tp).
    # Shares hf_trainer's pins (the hf extra).
    "hf_tp": ("hf", {"hf_tp": "float64"}),
    "ringmaster_cp": ("ringmaster", {"ringmaster_cp": "float64", "ringmaster_cp.preshifted-labels": "float64"}),
    # Heavy: verl pulls ray, wandb, tensorboard (a 1.9 GB venv); not in the default run.
    "verl_fsdp": ("verl", {"verl_fsdp": "float32", "verl_fsdp.pretrain-mask": "float32",
                           "verl_fsdp.trainer-normalisers": "float32", "verl_fsdp.eos-pad-embedding": "float32"}),
    # From a source checkout (prime-rl is not on PyPI): PACKCHECK_PRIME_RL_SRC=/path/to/prime-rl; skipped without it.
    "prime_rl": ("prime-rl", {"prime_rl": "float64", "prime_rl.fused-lm-head": "float64", "prime_rl.cp-rank-loss": "float64"}),
    # GPU only (CUDA): never in the default run. This session (CPU torch) checks that every case is declined with the
    # reason; on a GPU machine run it in that machine's torch as docs/gpu.md says (`packcheck run --engine torchtitan --device cuda`).
    "torchtitan": ("torchtitan", {"torchtitan": "bfloat16"}),
}
# adapter -> (environment variable naming the engine's source checkout, where to get it)
SOURCE_CHECKOUTS = {"prime_rl": ("PACKCHECK_PRIME_RL_SRC", "git clone https://github.com/PrimeIntellect-ai/prime-rl")}
# The light adapters CI runs. Their extras pin the same transformers (5.24.0), so CI runs them in one environment
# (`nox -s engines`): fewer venvs of torch and transformers, minutes of the CI budget. TRL (trl_sft, trl_grpo) is
# `nox -s engines`' and `adapters(adapter='trl')`'s, not CI's: its commands were 206 s of the engines' 359 (2026-12-07,
# 2 cores), over the 15-minute budget; hf_trainer keeps transformers' Trainer in CI, ringmaster_cp a CP engine.
CI_ADAPTERS = ("hf_trainer", "ringmaster_cp")
ENGINE_ADAPTERS = (*CI_ADAPTERS, "trl")
# engines no absolute scenario can judge yet, run relative-only on purpose (docs/isolation.md, "The absolute check")
RELATIVE_ONLY = {"trl_grpo": "a policy loss on unpacked rows only: oracle_agreement judges the SFT step, and golden_regression "
                             "and gradient_oracle need what it does not declare"}
nox.options.sessions = ["ci"]  # `nox`: CI's run (the package session's check runs inside it)


def skip_without_checkout(session: nox.Session, adapter: str) -> None:
    """An adapter run from a source checkout skips (exit 0, with the reason) when its variable is unset."""
    if adapter in SOURCE_CHECKOUTS and not os.environ.get(SOURCE_CHECKOUTS[adapter][0]):
        variable, how = SOURCE_CHECKOUTS[adapter]
        session.skip(f"{variable} is not set: {adapter} runs from a source checkout ({how}; then {variable}=/path/to/it)")


def adapter_engines(adapter: str, variants: bool) -> dict[str, str]:
    """The session's adapters (undotted names), or their finding variants, with their dtypes."""
    return {engine: dtype for engine, dtype in ADAPTERS[adapter][1].items() if ("." in engine) == variants}


def conformance_commands(session: nox.Session, engines: dict[str, str], arm_timeout: int = 120,
                         families: tuple[str, ...] = ()) -> list[list[str]]:
    # world-4 launches of a real engine need more than the default 30 s per arm on 2 cores
    return [["pytest", "--pyargs", "packcheck.conformance", "--engine", engine, "--dtype", dtype, "--arm-timeout", str(arm_timeout),
             *(["--family", *families] if families else []), *(["--relative-only"] if engine in RELATIVE_ONLY else []),
             *session.posargs] for engine, dtype in engines.items()]


def conformance_of(session: nox.Session, engines: dict[str, str]) -> None:
    for command in conformance_commands(session, engines):
        session.run(*command)


def adapter_tests_and_conformance(session: nox.Session, engines: dict[str, str]) -> None:
    session.run("pytest", *(f"tests/adapters/{name}" for name in engines), *session.posargs)
    conformance_of(session, engines)


def session_env(session: nox.Session) -> dict[str, str]:
    """The environment session.run gives a command, for commands started outside it."""
    return {**os.environ, **{k: v for k, v in session.env.items() if v is not None},
            "PATH": os.pathsep.join([session.bin, os.environ.get("PATH", "")]), "VIRTUAL_ENV": os.path.dirname(session.bin)}


def run_two_at_a_time(session: nox.Session, commands: list[list[str]]) -> None:
    """The commands in the session's environment, two at a time, each one's output printed whole when it ends; the session fails naming every command that failed. A conformance run keeps about one core busy (pytest
    and a world-1 rank take turns), so on the 2-core CI machine two of them take little longer than one."""
    if session._runner.global_config.install_only:  # session.run's own rule: `nox --install-only` runs no command
        session.log(f"Skipping {len(commands)} commands, as --install-only is set.")
        return
    env = session_env(session)

    def run(command: list[str]) -> tuple[list[str], int]:
        started = time.monotonic()
        done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # the seconds of each command, for the CI budget (README, docs/architecture.md)
        session.log(f"{' '.join(command)}: exit {done.returncode} after {time.monotonic() - started:.0f} s\n{done.stdout}")
        return command, done.returncode

    with ThreadPoolExecutor(max_workers=2) as pool:
        failed = [" ".join(command) for command, code in pool.map(run, commands) if code != 0]
    if failed:
        session.error("failed: " + "; ".join(failed))


@nox.session
@nox.parametrize("adapter", list(ADAPTERS))
def adapters(session: nox.Session, adapter: str) -> None:
    """A third-party engine in its own pinned env: the adapter's tests, then the conformance suite."""
    skip_without_checkout(session, adapter)
    install(session, f"test,{ADAPTERS[adapter][0]}")
    adapter_tests_and_conformance(session, adapter_engines(adapter, variants=False))


@nox.session
def engines(session: nox.Session) -> None:
    """The light adapters (ENGINE_ADAPTERS: CI's and TRL) in one environment: every adapter's tests and the conformance
    suite per engine, two at a time."""
    install(session, ci_extras(ENGINE_ADAPTERS))
    run_engines(session, adapters=ENGINE_ADAPTERS)


def ci_extras(adapters: tuple[str, ...] = CI_ADAPTERS) -> str:
    return ",".join(["test", *(ADAPTERS[adapter][0] for adapter in adapters)])


def run_engines(session: nox.Session, families: tuple[str, ...] = (), also: list[list[str]] = (),
                adapters: tuple[str, ...] = CI_ADAPTERS) -> None:
    """The commands `also`, then the CI adapters' tests and their conformance runs on `families` (default: every family
    each engine declares), two at a time: `also` first, the longest of them."""
    engines = {engine: dtype for adapter in adapters for engine, dtype in adapter_engines(adapter, variants=False).items()}
    # two at a time: arms wait on each other's cores, hence the longer arm timeout
    run_two_at_a_time(session, [*also, ["pytest", *(f"tests/adapters/{name}" for name in engines), *session.posargs],
                                *conformance_commands(session, engines, arm_timeout=300, families=families)])


# The family CI judges the CI adapters on. Each of them declares llama and qwen3; `nox -s engines` judges every family
# it declares. Their conformance runs were 412 s of commands on the 2-core machine, about half of it qwen3.
CI_FAMILIES = ("llama",)


@nox.session
def ci(session: nox.Session) -> None:
    """What CI runs: the tests session, then the engines session on CI_FAMILIES, in one environment (the CI adapters'
    extras pin the transformers the tests run on too: one venv of torch and transformers fewer to install), with the
    package session's wheel check, on CI_FAMILIES too, among the engines' commands (two at a time, it first: the
    longest of them). Not the tests beside the engines' commands: on 2 cores that ran at a load of 6 and took longer
    (1348 s against about 1200 s one after the other, 2026-12-07)."""
    install(session, ci_extras())
    run_tests(session)
    # the wheel's claims each on one family (CI_FAMILIES); on every family in `nox -s package`
    run_engines(session, families=CI_FAMILIES, also=[wheel_check(session, "--family", CI_FAMILIES[0])])


@nox.session(default=False)
@nox.parametrize("adapter", [name for name in ADAPTERS if adapter_engines(name, variants=True)])
def findings(session: nox.Session, adapter: str) -> None:
    """The adapter's finding variants through the conformance suite: each pinned finding must still reproduce."""
    skip_without_checkout(session, adapter)
    install(session, f"test,{ADAPTERS[adapter][0]}")
    conformance_of(session, adapter_engines(adapter, variants=True))


# The transformers releases the Trainer adapter is run under (nox -s releases): release -> (the accelerate of its time, the
# engines run there). Every pinned release range (KnownFinding.engine_versions, hf_trainer/release_findings.py) is run at
# both edges, the last release inside (its cells must fail as pinned: strict expected failures) and the first outside
# (they must pass: a pin left there fails as an unexpected pass): H6 (<4.46) at 4.45.2 / 4.46.1 (4.46.0 was yanked), H5
# (<4.53.1) at 4.53.0 / 4.53.1, where hf_trainer.use-cache must still leak (H2's gate); then the first 5.x and the
# pinned one (the hf extra). docs/findings.md has the matrices and which edges were run.
RELEASES = {
    "4.45.2": ("1.2.1", ("hf_trainer",)),
    "4.46.1": ("1.2.1", ("hf_trainer",)),
    "4.53.0": ("1.8.1", ("hf_trainer",)),
    "4.53.1": ("1.8.1", ("hf_trainer", "hf_trainer.use-cache")),
    "5.0.0": ("1.12.0", ("hf_trainer",)),
    "5.24.0": ("1.15.0", ("hf_trainer",)),
}


# Where the releases sessions record their verdicts (docs/history.md): one store outside every session's own folders, so
# the six sessions accumulate into it and `packcheck history --store reports/releases-history.sqlite` draws the margins over
# the releases; $PACKCHECK_HISTORY, where set, is used instead.
RELEASES_HISTORY = "reports/releases-history.sqlite"


@nox.session(default=False)
@nox.parametrize("transformers", list(RELEASES))
def releases(session: nox.Session, transformers: str) -> None:
    """hf_trainer under one transformers release: its batch tests, then the conformance suite (float32, every family
    that release defines) for each engine run there, in a checkpoint cache of the session's own (written by that release),
    each conformance run recorded in one history store (RELEASES_HISTORY)."""
    accelerate, engines = RELEASES[transformers]
    session.install(CPU_TORCH)
    session.install("-e", ".[test]", f"transformers=={transformers}", f"accelerate=={accelerate}", "-c", "constraints/cpu-torch.txt")
    session.env["PACKCHECK_CACHE_DIR"] = session.create_tmp()
    session.env["PACKCHECK_HISTORY"] = os.environ.get("PACKCHECK_HISTORY") or os.path.abspath(RELEASES_HISTORY)
    session.run("pytest", "tests/adapters/hf_trainer/test_hf_translation.py", "-k", "not legacy_ga", *session.posargs)
    conformance_of(session, dict.fromkeys(engines, "float32"))


@nox.session(python=False, default=False)
def gpu(session: nox.Session) -> None:
    """On a CUDA machine, in its own torch: the suite in float32 and bfloat16 on cuda (nox -s gpu)."""
    for dtype in ("float32", "bfloat16"):
        session.run("python", "-m", "pytest", "--pyargs", "packcheck.conformance", "tests/test_reference_model_parity.py",
                    "--device", "cuda", "--dtype", dtype, *session.posargs)
    session.run("python", "-m", "pytest", "tests/test_device_result.py", *session.posargs)


@nox.session(python=False, default=False)
def bench(session: nox.Session) -> None:
    """On a CUDA machine, in its own torch: the trainer benchmark, reference vs reference.fast vs transformers
    (python -m packcheck.impls.reference.bench; docs/performance.md). Posargs replace the default 0.6b, 4k-row run."""
    session.run("python", "-m", "packcheck.impls.reference.bench", *(session.posargs or ("--model", "0.6b", "--row-tokens", "4096")))
