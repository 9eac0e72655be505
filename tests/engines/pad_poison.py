"""An engine that declares Capabilities(pad_poison=True) and never writes the poison: poisoned_pads' negative control of
its canary (every other comparison agrees, since unpoisoned pads are what the clean twin has)."""

from __future__ import annotations

from packcheck.harness.contract import Case, StepResult
from tests.engines.single_process import SingleProcessReference


class IgnoresPadPoison(SingleProcessReference):
    name = "reference.ignores-pad-poison"

    def run(self, case: Case) -> StepResult | None:
        self.require_supported(case)
        return super().run(case.with_(pad_poison=None))
