"""Engines that attack the harness, on purpose or by accident: one per way an engine could fake a
green run or break the run of the engines after it (tests/test_hostile_engines.py). Each is the
reference with one misdeed, so that every verdict it gets is about that misdeed alone."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from packcheck.harness.contract import SINGLE_PROCESS, Partition, StepResult
from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.mesh import Mesh


class ExitsCleanly(ReferenceEngine):
    """sys.exit(0) inside run: once made `packcheck run` exit 0 after an earlier FAIL."""

    name = "hostile.sys-exit"

    def run(self, case):
        sys.exit(0)


class ExitsHard(ReferenceEngine):
    """os._exit(0) inside run: no exception, no report, status 0."""

    name = "hostile.os-exit"

    def run(self, case):
        sys.stdout.flush()
        os._exit(0)


class Interrupts(ReferenceEngine):
    name = "hostile.keyboard-interrupt"

    def run(self, case):
        raise KeyboardInterrupt


class Hangs(ReferenceEngine):
    """A single-process step that never returns: once ended the whole run."""

    name = "hostile.hangs"

    def run(self, case):
        time.sleep(3600)


class FailsToBuild(ReferenceEngine):
    name = "hostile.fails-to-build"

    def __init__(self):
        raise RuntimeError("cannot find the engine's config file")


class NeverBuilds(ReferenceEngine):
    name = "hostile.never-builds"

    def __init__(self):
        time.sleep(3600)


class PatchesAttention(ReferenceEngine):
    """Monkeypatches torch's SDPA for everyone in the process (and computes with it)."""

    name = "hostile.patches-sdpa"

    def run(self, case):
        original = torch.nn.functional.scaled_dot_product_attention
        torch.nn.functional.scaled_dot_product_attention = lambda *a, **k: original(*a, **k) * 1.5
        return super().run(case)


class PoisonsCheckpoint(ReferenceEngine):
    """Overwrites the checkpoint it was handed: every later run loading it would start from other weights."""

    name = "hostile.poisons-checkpoint"

    def run(self, case):
        result = super().run(case)
        (Path(case.model.checkpoint) / "model.safetensors").write_bytes(b"poison")
        return result


class ChangesDirectory(ReferenceEngine):
    name = "hostile.chdir"

    def run(self, case):
        os.chdir("/")
        return super().run(case)


class MetaGradients(ReferenceEngine):
    name = "hostile.meta-grads"

    def run(self, case):
        result = super().run(case)
        return replace(result, grads={k: torch.empty(v.shape, device="meta", dtype=v.dtype) for k, v in result.grads.items()})


class UnserialisableNotes(ReferenceEngine):
    name = "hostile.object-in-notes"

    def run(self, case):
        return replace(super().run(case), notes={"handle": object()})


class BadText(ReferenceEngine):
    """Lone surrogates, control characters and markup in what it raises."""

    name = "hostile.surrogates"

    def run(self, case):
        raise RuntimeError("kernel failed: \ud800\udfff half a pair, a bell \x07 and an escape \x1b[31m red <img src=x onerror=alert(1)>")


class LongName(ReferenceEngine):
    name = "hostile." + "x" * 300


class EscapingName(ReferenceEngine):
    """A name that, used as a path, would write outside the run directory."""

    name = "../../escaped-engine"


class LowPrecision(ReferenceEngine):
    """Reports float32 gradients in a float64 run: exactly the precision the run is there to see."""

    name = "hostile.float32-grads"

    def run(self, case):
        result = super().run(case)
        return replace(result, grads={k: v.float() for k, v in result.grads.items()})


class BoolLoss(ReferenceEngine):
    name = "hostile.bool-loss"

    def run(self, case):
        return replace(super().run(case), loss=True)


class Constant(ReferenceEngine):
    """Computes nothing: the same numbers for every case, shaped to fit."""

    name = "hostile.constant"

    def run(self, case):
        result = super().run(case)
        return StepResult(
            logprobs=[torch.cat([torch.zeros(1, dtype=lp.dtype), torch.full((len(lp) - 1,), -1.0, dtype=lp.dtype)]) for lp in result.logprobs],
            loss=1.0, num_loss_tokens=case.num_loss_tokens, grads={k: torch.full_like(v, 0.01) for k, v in result.grads.items()},
            dloss_dlogprobs=None if result.dloss_dlogprobs is None else [torch.zeros_like(w) for w in result.dloss_dlogprobs],
            params_after=result.params_after,
        )


class IgnoresMesh(ReferenceEngine):
    """Declares dp x cp but every rank computes the whole batch alone and issues no collective:
    its distributed arms return exactly the single-process numbers."""

    name = "hostile.ignores-mesh"

    def run(self, case):
        whole = Partition.single_rank([micro_batch for rank in case.partition.per_rank for micro_batch in rank])
        return self.train(case.with_(parallel=SINGLE_PROCESS, partition=whole), Mesh.single())


class IgnoresMeshBehindAFinding(IgnoresMesh):
    """Ignores its mesh and pins a finding on the scenario that would see it: no finding may excuse a
    broken contract (its margin is inf, so it would match any min_margin)."""

    name = "hostile.ignores-mesh-behind-a-finding"
    known_findings = (KnownFinding(id="X1", kind=FindingKind.DEFECT, scenario="cp_vs_nocp", summary="anything at all",
                                   evidence="hostile.py: this engine", upstream="none found", min_margin=1.0, measured="nothing"),)


def _groups(plan) -> tuple[list, list]:
    """Every rank's context- and data-parallel groups, created in the same order on every rank (rank = dp_rank x cp + cp_rank)."""
    import torch.distributed as dist

    cp_groups = [dist.new_group([d * plan.cp + c for c in range(plan.cp)]) for d in range(plan.dp)]
    dp_groups = [dist.new_group([d * plan.cp + c for d in range(plan.dp)]) for c in range(plan.cp)]
    return cp_groups, dp_groups


def _talk(plan, layers: int) -> None:
    """Collectives that reach every peer: one per attention layer over the context-parallel group, one over the
    data-parallel group; exactly what the collective trace asks of a rank that ran on its mesh, and nothing more."""
    import torch.distributed as dist

    cp_groups, dp_groups = _groups(plan)
    rank = dist.get_rank()
    for _ in range(layers if plan.cp > 1 else 0):
        dist.all_reduce(torch.zeros(1), group=cp_groups[rank // plan.cp])
    if plan.dp > 1:
        dist.all_reduce(torch.zeros(1), group=dp_groups[rank % plan.cp])


class IgnoresMeshQuietly(IgnoresMesh):
    """IgnoresMesh that also issues the collectives a mesh would need, with nothing in them: every rank computes the
    whole batch alone, and the collective trace alone cannot tell."""

    name = "hostile.ignores-mesh-quietly"

    def run(self, case):
        result = super().run(case)
        _talk(case.parallel, int(case.model.config["num_hidden_layers"]))
        return result


class RunsCpAsDp(ReferenceEngine):
    """Context parallelism silently run as data parallelism: every rank of a context-parallel group computes its
    data-parallel rank's rows whole (data parallelism over the ranks of one CP index), then talks over its CP group
    once per layer as a real CP engine would. The numbers are the single-process ones."""

    name = "hostile.cp-as-dp"

    def run(self, case):
        import torch.distributed as dist

        plan = case.parallel
        _, dp_groups = _groups(plan)
        rank = dist.get_rank()
        mesh = Mesh(dp=plan.dp, cp=1, rank=rank // plan.cp, dp_group=dp_groups[rank % plan.cp] if plan.dp > 1 else None)
        result = self.train(case.with_(parallel=replace(plan, cp=1, cp_style=None)), mesh)
        _talk(plan, int(case.model.config["num_hidden_layers"]))
        return result



class ForgesTokenMeter(IgnoresMeshQuietly):
    """IgnoresMeshQuietly that then writes into its rank's token meter the counts of the share its rank should have
    computed (its data-parallel rank's micro-batches, its context-parallel shard of them): the meter and the collective
    trace live in the engine's process, and what they record there is the engine's to write (docs/isolation.md)."""

    name = "hostile.forges-token-meter"

    def run(self, case):
        from collections import Counter

        import torch.distributed as dist
        from torch.overrides import _get_current_function_mode_stack

        from packcheck.harness.launch.token_meter import TokenMeter
        from packcheck.harness.run.work_share import dp_shares

        result = super().run(case)
        if case.parallel.world_size == 1:  # no meter to forge
            return result
        dp_rank, cp_rank = divmod(dist.get_rank(), case.parallel.cp)
        share = sorted(dp_shares(case)[dp_rank].elements())
        for meter in (m for m in _get_current_function_mode_stack() if isinstance(m, TokenMeter)):
            meter.counts, meter.lookups = dict(Counter(share[cp_rank::case.parallel.cp])), 1
        return result

class ForgesPassLine(ReferenceEngine):
    """A newline in its name: printed raw, the rest of the name is a console line of its own, a forged PASS."""

    name = "hostile.newline\nPASS (worst error/tolerance 0.01) 0.10s forged"


class ExitsEarlyOnRank1(ReferenceEngine):
    """Rank 1 of a mesh ends its process with status 0 in the middle of the case; rank 0 waits in a collective."""

    name = "hostile.rank1-exits-0"

    def run(self, case):
        import torch.distributed as dist

        if dist.is_initialized() and dist.get_rank() == 1:
            sys.stdout.flush()
            os._exit(0)
        return super().run(case)


class PrintsALot(ReferenceEngine):
    """40 MB of prints in one case: once copied whole into the run's logs."""

    name = "hostile.prints-a-lot"

    def run(self, case):
        line = "x" * 1023
        for _ in range(40 * 1024):
            print(line)
        return super().run(case)


class HugeNotes(ReferenceEngine):
    """20 MB of notes: once a report.html of three times that and gigabytes of harness memory."""

    name = "hostile.huge-notes"

    def run(self, case):
        return replace(super().run(case), notes={"blob": "x" * (20 * 1024 * 1024)})


class ExtraTensor(ReferenceEngine):
    """A 64 MiB gradient under a name the checkpoint lacks: invalid, and once kept whole in every copy of the arm."""

    name = "hostile.extra-tensor"

    def run(self, case):
        result = super().run(case)
        return replace(result, grads={**result.grads, "junk.weight": torch.zeros(8 * 1024 * 1024, dtype=torch.float64)})


# -- engines that reach outside their case (docs/isolation.md) ---------------------------------

def _out_of_run(case_dir: str) -> Path:
    """The run's --out, from the case's working directory <out>/launches/<engine>/launch-<n>/cases/<case>."""
    path = Path(case_dir)
    while path.name != "launches":
        path = path.parent
    return path.parent


FORGE = """
import json, pathlib, sys, time
time.sleep(float(sys.argv[2]))
out = pathlib.Path(sys.argv[1])
while not (out / 'results.json').exists():  # written when the run ends
    time.sleep(0.1)
time.sleep(0.5)
results = json.loads((out / 'results.json').read_text())
for verdict in results['verdicts']:
    verdict['status'] = 'pass'
(out / 'results.json').write_text(json.dumps(results))
(out / 'forged').write_text('forged')
time.sleep(600)
"""


class SpawnsDetached(ReferenceEngine):
    """Starts a detached (setsid) grandchild that waits for the run to end, then rewrites its results.json to
    all-pass: once outlived the run and forged a green report."""

    name = "hostile.spawns-detached"

    def run(self, case):
        import subprocess

        out = _out_of_run(os.getcwd())
        subprocess.Popen([sys.executable, "-c", FORGE, str(out), "3"], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (out.parent / "spawned").write_text(str(os.getpid()))  # beside --out: read-only to a confined engine
        return super().run(case)


class SpawnsDetachedAndHangs(SpawnsDetached):
    """As SpawnsDetached, then never returns: for killing the harness while the grandchild lives."""

    name = "hostile.spawns-detached-and-hangs"

    def run(self, case):
        super().run(case)
        time.sleep(3600)


class SpawnsDetachedWhileBuilding(ReferenceEngine):
    """Starts the detached grandchild while its engine is being built (the launch's start-up), then never finishes
    building: for killing the harness before any case has started."""

    name = "hostile.spawns-detached-while-building"

    def __init__(self):
        import subprocess

        out = _out_of_run(os.path.dirname(os.path.abspath(sys.argv[-1])))  # the rank's argument: its launch's job.json
        subprocess.Popen([sys.executable, "-c", FORGE, str(out), "3"], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (out.parent / "spawned").write_text(str(os.getpid()))  # beside --out: read-only to a confined engine
        time.sleep(3600)


class ForksChild(ReferenceEngine):
    """Forks a plain child that sleeps on after its rank exits: once handed to init (PPID 1) and kept running."""

    name = "hostile.forks-child"

    def run(self, case):
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        return super().run(case)


def _drifted(result: StepResult) -> StepResult:
    """The result with every log-prob 1% off: what a wrong model computes."""
    return replace(result, logprobs=[lp * 1.01 for lp in result.logprobs])


class RewritesGolden(ReferenceEngine):
    """Returns a drifted result and writes it as the installed golden, with its digests, the way regen would: once
    passed golden_regression itself and made the reference fail it."""

    name = "hostile.rewrites-golden"

    def run(self, case):
        import json

        from packcheck.harness.golden import golden_path, write_golden

        result = _drifted(super().run(case))
        provenance = json.loads((golden_path(case.model.family) / "provenance.json").read_text())
        write_golden(case.model.family, case, result, {k: v for k, v in provenance.items() if k not in ("file_digests", "provenance_digest")})
        return result


class LoosensFloor(ReferenceEngine):
    """Runs in float32 with a drifted result and rewrites the golden's float32 noise floor a billion times larger
    (its provenance digest recomputed): once turned its failing golden_regression green."""

    name = "hostile.loosens-floor"
    capabilities = replace(ReferenceEngine.capabilities, dtypes=frozenset({"float32"}))

    def run(self, case):
        import json

        from packcheck.harness.golden import golden_path
        from packcheck.harness.golden.store import provenance_digest

        path = golden_path(case.model.family) / "provenance.json"
        provenance = json.loads(path.read_text())
        provenance["noise_floor"] = {dtype: {k: v * 1e9 for k, v in floor.items()} for dtype, floor in provenance["noise_floor"].items()}
        provenance["provenance_digest"] = provenance_digest(provenance)
        path.write_text(json.dumps(provenance, indent=1))
        return _drifted(super().run(case))


class WritesCache(ReferenceEngine):
    """Computes correctly, then scales every weight of the checkpoint cache's entries of its family by 1.1 and rewrites
    their recorded digests to match: once made the reference fail golden_regression in that run and every later one."""

    name = "hostile.writes-cache"

    def run(self, case):
        import hashlib
        import json

        from safetensors.torch import load_file, save_file

        from packcheck.harness.models.checkpoint import cache_dir

        result = super().run(case)
        for entry in cache_dir().glob(f"{case.model.family}-*"):
            weights = entry / "model.safetensors"
            if entry.is_dir() and weights.exists():
                save_file({k: v * 1.1 for k, v in load_file(str(weights)).items()}, str(weights), metadata={"format": "pt"})
                record = entry.with_name(entry.name + ".digests.json")
                record.write_text(json.dumps({p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(entry.iterdir())}))
        return result


class KillsItsWarden(SpawnsDetached):
    """Starts the detached grandchild, then SIGKILLs its launch's warden (the agent's parent): its launch dies with it,
    and the grandchild is handed up to the harness, not to the warden."""

    name = "hostile.kills-its-warden"

    def run(self, case):
        import signal

        super().run(case)
        agent = os.getppid()
        with open(f"/proc/{agent}/stat") as stat:
            text = stat.read()
        os.kill(int(text[text.rindex(")") + 2:].split()[1]), signal.SIGKILL)
        time.sleep(3600)


# -- engines that leave the run nothing to judge or lose its evidence (issue 48) ----------------

class UnknownFamilyOnly(ReferenceEngine):
    """Declares only a family packcheck does not know: every cell is left out, and a run of it once said "0 verdicts"
    and exited 0."""

    name = "hostile.unknown-family-only"
    capabilities = replace(ReferenceEngine.capabilities, families=frozenset({"no-such-family"}))


class CapabilitiesAsDict(ReferenceEngine):
    """Declares its capabilities as a dict: once ended as "the launch ended", the cause never named."""

    name = "hostile.capabilities-as-dict"
    capabilities = {"families": ["llama"], "dtypes": ["float64"]}


class DeclinesWithANumber(ReferenceEngine):
    """Returns a number from unsupported_reason: once taken as a decline (the case unsupported), not a broken contract."""

    name = "hostile.declines-with-a-number"

    def unsupported_reason(self, case):
        return 5


class AliasedGradients(ReferenceEngine):
    """Returns one gradient tensor under two names of the same shape (as an engine with tied weights does): the
    harness's own save once crashed on the shared storage ("Some tensors share memory") and blamed the engine. Its
    packed and unpacked arms alias alike, so packed_vs_unpacked passes."""

    name = "hostile.aliased-gradients"

    def run(self, case):
        result = super().run(case)
        first, second = [(a, b) for a in result.grads for b in result.grads if a < b and result.grads[a].shape == result.grads[b].shape][0]
        return replace(result, grads={**result.grads, second: result.grads[first]})


class PreCreatesNextCase(ReferenceEngine):
    """Makes the folders of its launch's next cases before packcheck does: once ended the whole run with "[Errno 17] File
    exists", exit 2, no verdict in results.json and the engine never named."""

    name = "hostile.pre-creates-next-case"

    def run(self, case):
        here = Path(os.getcwd())  # <launch>/cases/<index>-<name>
        index = int(here.name.split("-")[0])
        for later in range(index + 1, index + 4):
            for name in ("packed", "unpacked", "oracle"):
                (here.parent / f"{later:03d}-{name}").mkdir(exist_ok=True)
        return super().run(case)
