"""One kernel path's process: `python -m packcheck.harness.golden.path_worker JOB.json OUT_DIR`.

Runs the job's engine on each of its cases in this process (whose kernel settings the parent
chose through the environment) and writes each validated result to OUT_DIR/<key>/, and the
ATen capability the process actually ran with to OUT_DIR/kernel.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from packcheck.harness.contract import Case
from packcheck.harness.engines import resolve_engine, validate_result


def main(job_path: str, out_dir: str) -> int:
    job = json.loads(Path(job_path).read_text())
    out = Path(out_dir)
    engine = resolve_engine(job["engine"])
    for key, data in job["cases"].items():
        case = Case.from_json(data)
        validate_result(engine.name, case, engine.run(case)).save(out / key)
    (out / "kernel.json").write_text(json.dumps({"capability": torch.backends.cpu.get_cpu_capability().lower(),
                                                 "threads": torch.get_num_threads()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
