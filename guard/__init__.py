"""packcheck.guard: the packed path checked inside the user's own training run, on its real batches (docs/guard.md).

    from packcheck.guard import Guard, check
    guard = Guard()                        # the first batch, and every batch that grows the regime
    guard(model, batch)                    # in the loop, before the real step: GuardFailure on a packing bug

transformers' Trainer and TRL's trainers: `trainer.add_callback(PackingGuardCallback())`
(packcheck.guard.transformers_callback). `packcheck replay CASE_DIR/case.json` reruns a failing check's shrunk case.

    batch.py                the documents of a packed batch; the batches built from some of them
    runs.py                 the packed step, the documents alone, the higher-precision oracle
    judge.py                the comparisons, the tolerance, the verdict and its diagnosis
    where.py                the first divergent module of a failing check
    shrink.py               a failing batch made small
    case_file.py            the case a failing check leaves, and reading it back
    replay.py               `packcheck replay` of a guard case
    state.py                the user's run left as it was
    check.py                the Guard: when to check, and what a failure does
    transformers_callback.py  the TrainerCallback (transformers, TRL)
"""

from packcheck.guard.check import Guard, GuardFailure, check
from packcheck.guard.judge import GuardVerdict

__all__ = ["Guard", "GuardFailure", "GuardVerdict", "check"]
