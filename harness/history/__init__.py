"""The history of an engine's margins: every run's verdicts kept in one SQLite store, drawn over commits and releases,
with the steps found in each cell's series and what changed in the environment at each (docs/history.md).

- store.py: the SQLite file (schema packcheck.history/1): append a run, read the tables back as pandas;
- entry.py: a run's results (results.json's object) as one entry of the store, with the engine's identity and environment;
- record.py: where the store is (--history, $PACKCHECK_HISTORY) and recording that never breaks a run;
- importer.py: old run directories into the store;
- series.py: each cell's margins in run order, points labelled by release or commit;
- steps.py: step detection on a series (a penalised piecewise-constant fit of log10 margins, weighted by their spread);
- changes.py: what changed in the environment and the engine between two runs;
- gate.py: `--fail-on-step`, which steps fail a pull request;
- chart.py: one cell's series as SVG geometry;
- page.py, markdown.py: the HTML page (inline SVG, the report's look) and the Markdown summary.
"""

from packcheck.harness.history.store import SCHEMA, History, Store, StoreProblem

__all__ = ["SCHEMA", "History", "Store", "StoreProblem"]
