"""The elastic agent of one launch: `python -m packcheck.harness.launch.agent JOB.json`.

Runs torch's own launcher (`elastic_launch` with a `LaunchConfig`: torchrun semantics, a
single-node c10d rendezvous on a port the store picks itself, no restarts) with
`python -I -S rank_stub.py -m packcheck.harness.launch.worker JOB.json` as every rank's command (the stand-in
asks the launch's warden to fork the rank: harness/launch/rank_stub.py), and writes how the ranks
ended to `agent.json`. It runs in its own process (forked by its warden), not in the caller's, so that the caller
keeps its signal handlers and can kill a launch that stops making progress.
"""

from __future__ import annotations

import os
import sys
import traceback
import uuid

from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.elastic.rendezvous import dynamic_rendezvous
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from packcheck.harness.files import write_json_atomically
from packcheck.harness.launch import exit_status
from packcheck.harness.launch.job import Job
from packcheck.harness.launch.layout import LaunchDir
from packcheck.harness.launch.rank_stub import SCRIPT as RANK_STUB

MONITOR_INTERVAL = 0.1  # seconds between the agent's looks at its workers
SHUTDOWN_TIMEOUT = 5  # seconds between SIGTERM and SIGKILL when the agent tears ranks down


def launch_config(job: Job, launch: LaunchDir) -> LaunchConfig:
    optional = {"shutdown_timeout": SHUTDOWN_TIMEOUT} if "shutdown_timeout" in LaunchConfig.__dataclass_fields__ else {}  # torch >= 2.12
    return LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=job.world_size,
        run_id=f"packcheck-{uuid.uuid4().hex[:12]}",
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
        monitor_interval=MONITOR_INTERVAL,
        logs_specs=DefaultLogsSpecs(log_dir=str(launch.logs), redirects=Std.ALL),
        **optional,
    )


def method_name(depth: int = 2) -> str:
    """torch's `dynamic_rendezvous.get_method_name` (the name of the function `depth` frames up, for the rendezvous's
    event records), without `inspect.stack()`: that builds every frame's source context, and each context scans
    sys.modules, which holds torch's thousands of modules. Its 18 calls a launch cost about 0.45 s of CPU, most of an
    agent's own (docs/architecture.md, 2026-12-06 evening)."""
    try:
        return sys._getframe(depth).f_code.co_name
    except ValueError:  # fewer frames than `depth`
        return "no_method_name"


def main(argv: list[str] | None = None) -> int:
    job_path = os.path.abspath((sys.argv[1:] if argv is None else argv)[0])
    launch = LaunchDir(os.path.dirname(job_path))
    job = Job.load(job_path)
    exit_status.die_with_parent()
    os.environ.update(exit_status.children_environment({}))  # the ranks' parent is this agent
    if hasattr(dynamic_rendezvous, "get_method_name"):  # the torch releases that have it
        dynamic_rendezvous.get_method_name = method_name
    try:
        elastic_launch(launch_config(job, launch), sys.executable)("-I", "-S", RANK_STUB, "-m", "packcheck.harness.launch.worker", job_path)
    except ChildFailedError as failed:
        write_json_atomically(launch.agent_result, {"status": "failed", "ranks": {
            str(rank): {"exitcode": f.exitcode, "signal": f.signal_name() if f.exitcode < 0 else None, "pid": f.pid}
            for rank, f in failed.failures.items()
        }})
        return 1
    except BaseException as err:  # noqa: BLE001 - the launcher itself failed; the parent reports it
        write_json_atomically(launch.agent_result, {"status": "agent_error", "error": "".join(traceback.format_exception(err))})
        return 2
    write_json_atomically(launch.agent_result, {"status": "succeeded", "ranks": {}})
    return 0


if __name__ == "__main__":
    exit_status.exit_now(main())
