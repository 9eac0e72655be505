"""nox sessions: `nox --list` shows them; every session forwards its posargs to pytest or packcheck.

Uses the virtualenv backend with pip: uv does not see the CPU build of torch that lies on local
disk on the CPU machines. GPU sessions run in the current environment (python=False) because GPU
runners bring their own torch.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "virtualenv"
nox.options.sessions = ["tests"]

CPU_TORCH = "torch==2.13.0"


def install(session: nox.Session) -> None:
    session.install(CPU_TORCH)
    session.install("-e", ".[test]")


@nox.session
def tests(session: nox.Session) -> None:
    """The default CI run: unit tests and the conformance suite against the reference, float64, CPU."""
    install(session)
    session.run("pytest", *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """The conformance suite against any engine: nox -s conformance -- --engine pkg.module:Engine."""
    install(session)
    session.run("pytest", "conformance", *session.posargs)


@nox.session
def mutants(session: nox.Session) -> None:
    """Run the reference and every mutant through `packcheck run`, with an HTML report in runs/mutants."""
    install(session)
    session.run("packcheck", "run", "--engine", "reference", "mutant.*", "--out", "runs/mutants", *session.posargs, success_codes=[0, 1])


# Third-party engines, each in its own pinned environment: adapter name -> (its pyproject extra, the
# engines it registers: the adapter itself and the variants that reproduce its known findings).
ADAPTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "hf_trainer": ("hf", ("hf_trainer", "hf_trainer.legacy-ga", "hf_trainer.use-cache", "hf_trainer.float64")),
    "trl_sft": ("trl", ("trl_sft",)),
    "ringmaster_cp": ("ringmaster", ("ringmaster_cp", "ringmaster_cp.preshifted-labels")),
    # Heavy: verl pulls ray, wandb, tensorboard (a 1.9 GB venv); the session took 19 min 40 s on 2 shared cores
    # with a warm pip cache (docs/findings-verl.md). Not in the default CI run (nox.options.sessions).
    "verl_fsdp": ("verl", ("verl_fsdp", "verl_fsdp.pretrain-mask", "verl_fsdp.trainer-normalisers", "verl_fsdp.eos-pad-embedding")),
}


# the dtype each adapter engine runs the suite in (float64 unless listed; the engines say why)
ENGINE_DTYPES = {"hf_trainer": "float32", "hf_trainer.legacy-ga": "float32", "hf_trainer.use-cache": "float32", "trl_sft": "float32"}
# verl's PrecisionType knows fp16/bf16/fp32 only: every float64 cell would be unsupported
ENGINE_DTYPES |= dict.fromkeys(ADAPTERS["verl_fsdp"][1], "float32")


@nox.session
@nox.parametrize("adapter", list(ADAPTERS))
def adapters(session: nox.Session, adapter: str) -> None:
    """One third-party engine through the conformance suite, in its own pinned env: nox -s "adapters(adapter='trl_sft')"."""
    extra, engines = ADAPTERS[adapter]
    session.install(CPU_TORCH)
    session.install("-e", f".[test,{extra}]", "-c", "constraints/cpu-torch.txt")
    session.run("pytest", f"tests/adapters/{adapter}", *session.posargs)
    for engine in engines:  # world-4 launches of a real engine need more than the default 30 s per arm on 2 cores
        session.run("pytest", "conformance", "--engine", engine, "--dtype", ENGINE_DTYPES.get(engine, "float64"),
                    "--arm-timeout", "120", *session.posargs)


@nox.session(python=False, default=False)
def gpu(session: nox.Session) -> None:
    """On a CUDA machine, in its own torch: the suite in float32 and bfloat16 on cuda (nox -s gpu)."""
    for dtype in ("float32", "bfloat16"):
        session.run("python", "-m", "pytest", "conformance", "tests/test_reference_model_parity.py",
                    "--device", "cuda", "--dtype", dtype, *session.posargs)
