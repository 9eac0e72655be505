"""`packcheck run`'s progress (harness/run/progress.py): plain [k/N] lines with the elapsed time and an
ETA off a terminal, one line rewritten in place on one, and the ETA's arithmetic."""

from __future__ import annotations

import io

from packcheck.harness.run import progress as progress_module
from packcheck.harness.run.progress import CLEAR_LINE, Progress, duration, eta_seconds


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_eta_is_the_mean_time_per_finished_cell_times_the_cells_left():
    assert eta_seconds(elapsed=60.0, done=3, total=12) == 180.0
    assert eta_seconds(elapsed=60.0, done=0, total=12) is None, "no cell finished: no mean to extrapolate"
    assert eta_seconds(elapsed=60.0, done=12, total=12) == 0.0
    assert eta_seconds(elapsed=60.0, done=5, total=4) == 0.0, "a total counted low never gives a negative ETA"
    # a cell running for 5 s at a mean of 20 s: 15 s of it and 8 cells more; one running past the mean counts 0
    assert eta_seconds(elapsed=60.0, done=3, total=12, running=5.0) == 15.0 + 8 * 20.0
    assert eta_seconds(elapsed=60.0, done=3, total=12, running=50.0) == 8 * 20.0


def test_the_eta_weighs_the_cells_left_by_their_work_so_a_heavy_cell_to_come_is_not_priced_as_a_light_one():
    # three cells of 3, 3 and 45 arms: the first took 6 s, 2 s an arm, so the work left (48 arms) is 96 s, not 2 x 6 s
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, total=3, tty=False, clock=clock, work=3 + 3 + 45)
    progress.start("reference", "llama", "packed_vs_unpacked", work=3)
    clock.now += 6
    progress.finish("PASS 6.00s")
    assert out.getvalue().endswith("| elapsed 6s, ETA 1m36s\n")
    progress.start("reference", "llama", "rl_loss_aggregation", work=45)
    clock.now += 30  # 30 s into a cell priced at 90 s: 60 s of it and the last cell's 6 s
    assert progress.timing() == "elapsed 36s, ETA 1m06s"
    # a running cell priced at more than the work left is priced at what is left
    assert eta_seconds(elapsed=6.0, done=3, total=6, running=1.0, running_work=45) == 5.0


def test_a_matrix_run_prices_each_cell_by_its_scenarios_arms():
    from packcheck.harness.run.session import work_of
    from packcheck.harness.scenarios import SCENARIOS

    assert work_of(SCENARIOS["rl_loss_aggregation"]) == SCENARIOS["rl_loss_aggregation"].disk_arms > 10 * work_of(SCENARIOS["packed_vs_unpacked"])
    assert all(work_of(scenario) >= 1 for scenario in SCENARIOS.values())


def test_durations_read_as_seconds_minutes_or_hours():
    assert [duration(s) for s in (None, 0.4, 42, 185, 3720)] == ["?", "0s", "42s", "3m05s", "1h02m"]


def test_off_a_terminal_each_cell_is_one_plain_line_with_k_of_n_elapsed_and_eta():
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, total=3, tty=False, clock=clock)
    progress.start("reference", "llama", "mask_alignment")
    clock.now += 10
    progress.finish("PASS (worst error/tolerance 1.7e-06) 9.80s")
    progress.start("reference", "llama", "token_conservation")
    clock.now += 20
    progress.finish("FAIL (worst error/tolerance inf) 19.90s", "token_conservation [...]: FAIL\n  likely cause: ...")
    progress.close()
    assert out.getvalue().splitlines() == [
        "[1/3] reference llama mask_alignment ... PASS (worst error/tolerance 1.7e-06) 9.80s | elapsed 10s, ETA 20s",
        "[2/3] reference llama token_conservation ... FAIL (worst error/tolerance inf) 19.90s | elapsed 30s, ETA 15s",
        "token_conservation [...]: FAIL", "  likely cause: ...",
    ]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue(), "nothing is rewritten in a log"


def test_n_follows_the_families_an_engine_declares_once_it_starts():
    out = io.StringIO()
    progress = Progress(out, total=2 * 6, tty=False, clock=Clock())  # two engines, each counted as 6 cells
    progress.recount(expected=6, actual=2)  # the first declares fewer families
    progress.start("e", "llama", "s")
    assert out.getvalue() == "[1/8] e llama s ... "


def test_on_a_terminal_one_status_line_is_rewritten_and_each_verdict_stays_above_it(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(progress_module, "REFRESH_SECONDS", 3600.0)  # the ticker's redraws would make the text depend on timing
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, total=2, tty=True, clock=clock)
    progress.start("reference", "llama", "mask_alignment")
    clock.now += 30
    progress.finish("PASS 30.00s")
    progress.start("reference", "llama", "token_conservation")
    clock.now += 5
    progress.note("engine x: did not start")
    progress.close()
    assert out.getvalue().split("\n") == [
        f"{CLEAR_LINE}[1/2] reference llama mask_alignment ... 0s | 0/2 done, elapsed 0s, ETA ?"
        f"{CLEAR_LINE}[1/2] reference llama mask_alignment ... PASS 30.00s | elapsed 30s, ETA 30s",
        f"{CLEAR_LINE}[2/2] reference llama token_conservation ... 0s | 1/2 done, elapsed 30s, ETA 30s{CLEAR_LINE}engine x: did not start",
        f"{CLEAR_LINE}[2/2] reference llama token_conservation ... 5s | 1/2 done, elapsed 35s, ETA 25s{CLEAR_LINE}",
    ]


def test_the_status_line_is_cut_to_the_terminal_width_so_it_can_be_rewritten(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setattr(progress_module, "REFRESH_SECONDS", 3600.0)
    out = io.StringIO()
    progress = Progress(out, total=2, tty=True, clock=Clock())
    progress.start("reference", "llama", "mask_alignment")
    progress.close()
    drawn = out.getvalue().split(CLEAR_LINE)[1]
    assert len(drawn) == 39 and drawn.endswith("...")
