"""A run's directory (`--out`): the one owner of its files, their names, their schema and how they are read and written.

    run_dir = RunDir("reports/latest")
    results = ResultsFile(run_dir, provenance)      # results.py: results.jsonl as verdicts come, results.json at the end
    load_results(run_dir)                           # results.py: the table, from results.json or an unfinished results.jsonl
    read_localisations(run_dir)                     # localisations.py: where each located verdict's arms part
    summaries(run_dir)                              # shrunk.py: what the report says of each shrunk case
    SavedArms(run_dir.arms(engine, family, scenario))   # saved_arms.py: a verdict's arms, read back

layout.py names every file (the tree is there); the modules beside it read and write them. Both front doors,
`packcheck run --out DIR` and the pytest plugin's `--out DIR`, write through here, and so does every later command
that adds to a run directory (`packcheck shrink`, `localise`, `report`). It stands on compare and below
(docs/architecture.md): the verdicts it writes are any object with `to_json()` and `comparisons` (results.py), and
what it reads back is the schema's JSON, so neither the runner (run/) nor the shrinker (shrink/) is needed to read a run.

Only RunDir is imported here (standard library only); import the readers and writers from their modules.
"""

from packcheck.harness.run_dir.layout import ArmDir, RunDir

__all__ = ["ArmDir", "RunDir"]
