"""The search for the smallest inputs on which a failing comparison still fails with the same bug class.

Each pass makes one kind of input smaller (harness/data/smaller.py) and keeps a candidate only when the scenario's
own run of it still fails the target (harness/shrink/target.py). The passes run in the order that makes every later
trial cheapest: ranks first (fewer processes), then layers (less compute per token), then the data: documents (delta
debugging over the set: halves, then quarters, ... removed while the failure stays), the packed rows (every document
scaled down with its row by one factor, then the row alone), each document's length (the shortest prefix, by
bisection), micro-batches; then heads and MLP width. Rounds repeat until one changes nothing. A number is searched
by trying its smallest value first and bisecting between what passed and what failed, so a search takes about log2
of each range in trials.

A candidate is kept only where the control, the reference, passes it too (where the reference passes the scenario's
own case): a case every engine fails tests nothing (a gradient whose true value is zero, compared relatively, fails
on rounding alone). No randomness: the same verdict at the same inputs gives the same trials in the same order, and, run to its end, the
same case (the engine's results are deterministic in float64). A candidate the scenario cannot build (a contract error:
a rank left without a sample, a document longer than its row) or that builds the same arms is never run; the same
candidate never runs twice. The budget is checked before each trial: a trial started in time runs to its end.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable

from packcheck.harness.contract import Case, ContractError
from packcheck.harness.data.size import Size
from packcheck.harness.data.smaller import Smaller
from packcheck.harness.errors import InputError
from packcheck.harness.judging.status import Status
from packcheck.harness.launch import LaunchPool
from packcheck.harness.models.smaller import head_counts, layer_count, mlp_width, seeded
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.scenarios import Scenario
from packcheck.harness.shrink.subject import CannotBuild, Subject, first_arms, run
from packcheck.harness.shrink.target import Target, in_one_line


class OutOfTime(Exception):
    """The budget is spent: the search keeps the smallest case it found."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Trial:
    step: str  # the pass that proposed it
    smaller: Smaller
    outcome: str  # "still fails", or why not
    seconds: float

    @property
    def kept(self) -> bool:
        return self.outcome == STILL_FAILS


STILL_FAILS = "still fails"


@dataclass(kw_only=True)
class Search:
    subject: Subject
    scenario: Scenario  # the subject's, or narrowed to the target's arms (harness/shrink/plans.py)
    target: Target
    pool: LaunchPool
    deadline: float  # time.monotonic() after which no trial starts
    control: Subject | None  # an engine that must pass every case kept (the reference), or None
    cases: dict[str, Case]  # the first stage's arms of `current`
    verdict: Verdict  # the scenario's verdict of `current`
    current: Smaller = field(default_factory=Smaller)
    say: Callable[[str], None] = lambda line: None
    trials: list[Trial] = field(default_factory=list)
    tried: dict[Smaller, bool] = field(default_factory=dict)
    not_run: int = 0  # candidates never run: they could not be built, or built the current arms
    step: str = ""

    @property
    def arm(self) -> Case:
        """The current case the sizes are read from (Target.case_of)."""
        return self.target.case_of(self.cases)

    def attempt(self, candidate: Smaller) -> bool:
        """Whether `candidate` still fails the target; if so it becomes the current case."""
        if candidate == self.current:
            return False
        if candidate in self.tried:
            return self.tried[candidate]
        try:
            cases = first_arms(self.scenario, self.subject.setting(candidate))
        except (CannotBuild, InputError):
            return self._not_run(candidate)
        if {n: c.digest() for n, c in cases.items()} == {n: c.digest() for n, c in self.cases.items()}:
            return self._not_run(candidate)
        if time.monotonic() >= self.deadline:
            raise OutOfTime
        started = time.monotonic()
        try:
            verdict = run(self.subject, self.scenario, candidate, self.pool)
            why = self.target.why_not(verdict)
            if why is None and self.control is not None and (control := run(self.control, self.scenario, candidate, self.pool)).status is not Status.PASS:
                why = f"the control {self.control.engine_name} does not pass it ({control.status}: {in_one_line(control)})"
        except (ContractError, InputError) as err:  # a later stage that cannot be built from the smaller first one
            verdict, why = None, f"cannot be built: {err}"
        trial = Trial(step=self.step, smaller=candidate, outcome=why or STILL_FAILS, seconds=time.monotonic() - started)
        self.trials.append(trial)
        self.tried[candidate] = trial.kept
        size = Size.of(self.target.case_of(cases))
        self.say(f"  [{len(self.trials)}] {changes(self.current, candidate)}: {size.tokens} tokens, {size.documents} documents: "
                 f"{trial.outcome} ({trial.seconds:.1f}s)")
        if trial.kept:
            self.current, self.cases, self.verdict = candidate, cases, verdict
        return trial.kept

    def _not_run(self, candidate: Smaller) -> bool:
        """A candidate that cannot be built, or builds the arms of the current one: not smaller, never run."""
        self.tried[candidate] = False
        self.not_run += 1
        return False

    def smallest(self, options: list[int], make: Callable[[int], Smaller]) -> None:
        """The smallest of `options` (ascending; the last is the current value) that still fails: the smallest first,
        then bisection between the largest that passed and the smallest that failed."""
        options = sorted(set(options))
        if len(options) < 2 or self.attempt(make(options[0])):
            return
        low, high = 0, len(options) - 1
        while high - low > 1:
            middle = (low + high) // 2
            if self.attempt(make(options[middle])):
                high = middle
            else:
                low = middle

    def run_passes(self) -> bool:
        """Every pass once, in order; whether the search ran to its end (False: the budget ran out)."""
        try:
            while True:
                before = self.current
                for name, step in PASSES:
                    self.step = name
                    step(self)
                if self.current == before:
                    return True
        except OutOfTime:
            return False


def changes(current: Smaller, candidate: Smaller) -> str:
    """What `candidate` changes of `current`, in words: `row 3`, `documents [8, 9]`, `document 9 cut to 2 tokens`."""
    said = []
    for name in (f.name for f in dataclasses.fields(Smaller)):
        new, old = getattr(candidate, name), getattr(current, name)
        if new == old:
            continue
        if name == "lengths":
            said += [f"document {i} cut to {n} tokens" for i, n in sorted(set(new) - set(old))]
        else:
            said.append(f"{name.replace('_', '-')} {list(new) if name == 'documents' else new}")
    return ", ".join(said)


def _with(search: Search, **changes) -> Smaller:
    return dataclasses.replace(search.current, **changes)


def ranks(search: Search) -> None:
    for plan in ("cp", "dp"):
        most = max(getattr(case.parallel, plan) for case in search.cases.values())
        search.smallest([*(2 ** k for k in range(most.bit_length()) if 2 ** k < most), most], lambda n, plan=plan: _with(search, **{plan: n}))


def layers(search: Search) -> None:
    model = search.arm.model
    if seeded(model):
        search.smallest(list(range(1, layer_count(model.config) + 1)), lambda n: _with(search, layers=n))


def documents(search: Search) -> None:
    """Delta debugging's reduction to complements: drop a half, else a quarter, ... of the documents kept."""
    kept = list(search.current.documents if search.current.documents is not None else range(len(search.arm.samples)))
    chunks = 2
    while len(kept) >= 2:
        size = -(-len(kept) // chunks)
        for start in range(0, len(kept), size):
            rest = kept[:start] + kept[start + size:]
            lengths = tuple(pair for pair in search.current.lengths if pair[0] in rest)
            if rest and search.attempt(_with(search, documents=tuple(rest), lengths=lengths)):
                kept, chunks = rest, max(chunks - 1, 2)
                break
        else:
            if chunks >= len(kept):
                return
            chunks = min(2 * chunks, len(kept))


def document_lengths(search: Search) -> dict[int, int]:
    """Each document kept (its index in the scenario's set) with its length now."""
    order = search.current.documents if search.current.documents is not None else range(len(search.arm.samples))
    return {index: len(sample.input_ids) for index, sample in zip(order, search.arm.samples)}


def cut_to(lengths: tuple[tuple[int, int], ...], cuts: dict[int, int]) -> tuple[tuple[int, int], ...]:
    """`lengths` (Smaller.lengths) with the documents of `cuts` cut to their new lengths."""
    return (*(pair for pair in lengths if pair[0] not in cuts), *sorted(cuts.items()))


def lengths(search: Search) -> None:
    """Each document kept cut to its shortest prefix that still fails, the longest document first."""
    now = document_lengths(search)
    for index in sorted(now, key=lambda i: (-now[i], i)):
        search.smallest(list(range(1, now[index] + 1)), lambda tokens, index=index: _with(search, lengths=cut_to(search.current.lengths, {index: tokens})))


def rows(search: Search) -> None:
    """The packed row shortened together with the documents in it, in two moves, because a document and its row can be
    stuck alone (a CP arm's shard holds loss tokens only where a document reaches past the row's middle: a document
    cannot be cut while the row is long, nor the row shortened while a document is).

    First every document and the row scaled by one factor (a row of r tokens instead of L, a document of n tokens cut
    to max(1, n * r // L)): the packing is kept, documents that shared a row still share it (and a cross-document leak
    with them), and one bisection shortens every document at once. Then the row alone, every document longer than it
    cut to it, over the rows shorter than the longest document (a longer one trims padding only): this parts documents
    but reaches a shard's edge the scaling cannot."""
    if search.arm.layout.seq_len is None:
        return
    row, now = search.arm.layout.seq_len, document_lengths(search)
    search.smallest(list(range(1, row + 1)), lambda shorter: _with(
        search, row=shorter, lengths=cut_to(search.current.lengths, scaled_cuts(now, row, shorter))))
    scaled_row, scaled = search.arm.layout.seq_len, document_lengths(search)
    search.smallest([*range(1, max(scaled.values())), scaled_row], lambda shorter: _with(
        search, row=shorter, lengths=cut_to(search.current.lengths, fitting_cuts(scaled, shorter))))


def scaled_cuts(lengths: dict[int, int], row: int, shorter: int) -> dict[int, int]:
    """The documents (index: length) of rows `row` tokens long, each scaled to rows of `shorter`: the ones it cuts.
    Rounding down keeps a row's documents within the shorter row, unless one is rounded up to its one token."""
    cuts = {i: max(1, n * shorter // row) for i, n in lengths.items()}
    return {i: n for i, n in cuts.items() if n < lengths[i]}


def fitting_cuts(lengths: dict[int, int], row: int) -> dict[int, int]:
    """The documents (index: length) longer than a row of `row` tokens, each cut to it."""
    return {i: row for i, n in lengths.items() if n > row}


def micro_batches(search: Search) -> None:
    most = max(len(case.partition.per_rank[0]) for case in search.cases.values())
    search.smallest(list(range(1, most + 1)), lambda n: _with(search, micro_batches=n))


def heads(search: Search) -> None:
    model = search.arm.model
    if seeded(model):
        search.smallest(head_counts(model.family, model.config), lambda n: _with(search, heads=n))


def width(search: Search) -> None:
    model = search.arm.model
    wide = mlp_width(model.family, model.config)
    if wide is not None and seeded(model):
        search.smallest([max(1, wide >> k) for k in range(wide.bit_length())], lambda n: _with(search, width=n))


PASSES: tuple[tuple[str, Callable[[Search], None]], ...] = (
    ("ranks", ranks), ("layers", layers), ("documents", documents), ("rows", rows), ("lengths", lengths),
    ("micro-batches", micro_batches), ("heads", heads), ("width", width))
