"""A failing verdict's saved arms in the HTML report: token strips laid out in packed rows with
document boundaries and CP shard cuts, per-rank collective traces where the ranks diverge, and
engine notes, on hand-made cases and results (each drawing checked against exact positions).
"""

from __future__ import annotations

import json
import re

import torch

from packcheck.harness.contract import Case, ModelSpec, ParallelPlan, Partition, Sample, StepResult, packed
from packcheck.harness.report import render_html
from packcheck.harness.report.collectives import collective_table, well_formed
from packcheck.harness.run_dir import RunDir

SEQ_LEN = 16
LENGTHS = (5, 7, 4, 9, 3)  # row 0: documents of 5, 7, 4 tokens (full); row 1: 9 + 3 + 4 padding
MODEL = ModelSpec(family="llama", config={"vocab_size": 32}, seed=0, checkpoint="/nonexistent")
PAYLOAD = "<script>document.body.dataset.injected = 'notes'</script>"


def _case(name: str, cp: int) -> Case:
    samples = [Sample(input_ids=[(3 * i + t) % 32 for t in range(n)], loss_mask=[0] + [1] * (n - 1)) for i, n in enumerate(LENGTHS)]
    return Case(name=name, model=MODEL, samples=tuple(samples), layout=packed(SEQ_LEN), partition=Partition.all_in_one(len(samples)),
                parallel=ParallelPlan(dp=1, cp=cp, cp_style="ring" if cp > 1 else None))


def _result(errors: dict[tuple[int, int], float] | None = None, **fields) -> StepResult:
    logprobs = [torch.full((n,), -1.0, dtype=torch.float64) for n in LENGTHS]
    for t in logprobs:
        t[0] = 0.0
    for (i, t), error in (errors or {}).items():
        logprobs[i][t] -= error
    return StepResult(logprobs=logprobs, loss=1.0, num_loss_tokens=sum(LENGTHS) - len(LENGTHS), grads={}, **fields)


def _write(run_dir, scenario: str, arms: dict[str, tuple[Case, StepResult]], rows: list[dict]) -> None:
    verdict = {"engine": "handmade", "family": "llama", "scenario": scenario, "dtype": "float64", "device": "cpu", "attention": "auto",
               "status": "fail", "diagnosis": "", "detail": "", "seconds": 0.1, "max_margin": rows[0]["margin"], "worst": rows[0],
               "comparisons": len(rows), "failing": len(rows), "reproduce": "packcheck run ...", "message": "FAIL"}
    keys = {k: verdict[k] for k in ("engine", "family", "scenario", "dtype", "device", "attention")}
    data = {"schema": "packcheck.results/1", "provenance": {}, "verdicts": [verdict], "rows": [keys | r for r in rows]}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.json").write_text(json.dumps(data))
    for name, (case, result) in arms.items():
        directory = RunDir(run_dir).arms("handmade", "llama", scenario) / name
        result.save(directory)
        (directory / "case.json").write_text(json.dumps(case.to_json()))


def _logprob_row(arm: str, against: str, observed: float) -> dict:
    return {"arms": f"{arm} vs {against}", "arm": arm, "against": against, "quantity": "logprobs", "item": "", "metric": "max_abs", "observed": observed, "threshold": 1e-10,
            "where": "", "passed": False, "margin": observed / 1e-10}


def _strip(html: str) -> str:
    return html[html.index('<figure class="strip'):html.index("</figure>", html.index('<figure class="strip'))]


def test_strip_draws_rows_boundaries_and_cp_cuts(tmp_path):
    # Row 0: sample 1 (document 2) drifts from its first target on: a cross-document leak.
    # Row 1: sample 3 drifts from token 8, row position 8 = the cut of cp=2: a shard-local bug.
    drift = {(1, t): 0.5 for t in range(1, 7)} | {(3, t): 0.25 for t in range(8, 9)}
    _write(tmp_path, "cp_vs_nocp", {"packed": (_case("packed", cp=2), _result(drift)), "unpacked": (_case("unpacked", cp=1), _result())},
           [_logprob_row("packed", "unpacked", 0.5)])
    strip = _strip(render_html(tmp_path))
    assert strip.count('class="label">row ') == 2
    px = 12  # seq_len 16 <= 60 tokens: 12 px per token
    assert strip.count('class="cut"') == 2 and f'x1="{8 * px}" x2="{8 * px}" y1="-4"' in strip
    boundaries = re.findall(r'x1="([\d.]+)" x2="[\d.]+" y1="-2"[^>]*class="boundary"', strip)
    assert [float(x) for x in boundaries] == [5 * px, 12 * px, 9 * px]  # row 0: 5, 12; row 1: 9 (padding after 12 is not a document)
    assert "row 0: starts at position 6, sample 1 token 1, the first target of document 2 of 3: at a document boundary" in strip
    assert "row 1: starts at position 8, sample 3 token 8: at a CP shard cut" in strip
    assert "dashed: CP shard cuts (cp=2)" in strip
    assert "in 1 the error starts at a document boundary; in 1 the error starts at a CP shard cut." in strip
    assert 'class="t-bad4"' in strip and 'class="t-pad"' in strip and 'class="t-exact"' in strip


def test_strip_marks_samples_the_arms_do_not_share(tmp_path):
    other = _case("other", cp=1)
    changed = list(other.samples)
    changed[2] = Sample(input_ids=[1, 2, 3, 4], loss_mask=[0, 1, 1, 1])
    other = other.with_(samples=tuple(changed))
    _write(tmp_path, "document_isolation", {"other": (other, _result({(4, 2): 1.0})), "base": (_case("base", cp=1), _result())},
           [_logprob_row("other", "base", 1.0)])
    strip = _strip(render_html(tmp_path))
    assert 'class="t-none"' in strip and "sample 2, document 3 of 3 in row 0, row positions 12-15: not compared" in strip
    assert "row 1: starts at position 11, sample 4 token 2, inside document 2 of 2" in strip
    assert "cut" not in strip.replace("document boundary", "")


def test_a_label_across_a_boundary_peaks_right_after_it(tmp_path):
    # The engine trains token 0 of every later document (predicted from the previous document) and
    # normalises by the larger count: every weight a little off, the boundary tokens off by a whole weight.
    case = _case("packed", cp=1)
    n = case.num_loss_tokens
    boundary = {(1, 0), (2, 0), (4, 0)}
    weights = [torch.tensor([-1.0 / (n + len(boundary)) if (i, t) in case.supervised | boundary else 0.0 for t in range(length)],
                            dtype=torch.float64) for i, length in enumerate(LENGTHS)]
    rows = [{"arms": "packed vs harness", "arm": "packed", "against": "harness", "quantity": q, "item": item, "metric": m, "observed": o, "threshold": th,
             "where": "", "passed": False, "margin": o / th if th else "inf"}
            for q, item, m, o, th in (("supervised_set", "", "mismatched", 3.0, 0.0),
                                      ("dloss_dlogprobs", "token weight", "max_rel", 0.1, 1e-10))]
    _write(tmp_path, "mask_alignment", {"packed": (case, _result(dloss_dlogprobs=weights))}, rows)
    strip = _strip(render_html(tmp_path))
    assert "loss-weight error |d loss/d logprob - expected| / max |expected| (expected: -1/N on the loss mask" in strip and "packed: llama float64 cpu packed(seq_len=16" in strip
    assert "the largest errors sit right after boundaries (3 tokens, each 5x or more above any other token&#39;s)" in strip


def _call(seq: int, op: str, group: list[int], shape: list[int], site: str = "engine.py:10 in step") -> dict:
    """A collective-recorder entry (packcheck.harness.collectives), as multi-rank results carry them."""
    return {"seq": seq, "op": op, "group": group, "tensors": [{"arg": "tensor", "param": "tensor", "shape": shape, "dtype": "float32"}],
            "args": {"reduce_op": "SUM"} if op == "all_reduce" else {}, "async": False, "state": "completed", "site": site}


def test_collective_traces_side_by_side_where_the_ranks_diverge(tmp_path):
    common = [_call(0, "all_gather", [0, 1], [64, 32]), _call(1, "all_gather", [0, 1], [32, 32])]
    own = {0: _call(2, "broadcast", [0], [8]), 1: _call(2, "broadcast", [1], [8])}  # each rank's own group: no divergence
    rank0 = [*common, own[0], _call(3, "all_gather", [0, 1], [16, 16], "vision.py:5 in tower"), _call(4, "all_reduce", [0, 1], [1])]
    rank1 = [*common, own[1], _call(3, "all_reduce", [0, 1], [1])]  # skipped the vision tower: a text-only micro-batch
    result = _result(collectives=[rank0, rank1], notes={"engine": PAYLOAD})
    _write(tmp_path, "vlm_collective_symmetry", {"mixed": (_case("mixed", cp=1), result)},
           [{"arms": "mixed vs harness", "arm": "mixed", "against": "harness", "quantity": "collectives", "item": "", "metric": "mismatched", "observed": 1.0,
             "threshold": 0.0, "where": "", "passed": False, "margin": "inf"}])
    html = render_html(tmp_path)
    table = html[html.index('class="collectives"'):]
    table = table[:table.index("</table>")]
    assert "on group [0, 1], per member (4 / 3 issued)" in table and "<th>rank 0</th><th>rank 1</th>" in table
    assert "group [0, 1], collective #2 on that group:" in table  # the recorder's own sentence
    assert "rank 0 issued all_gather(tensor: float32[16, 16]) on group [0, 1], seq 3, at vision.py:5 in tower (completed)" in table
    first = table[table.index('<tr class="first">'):]
    first = first[:first.index("</tr>")]
    assert first.count(" odd") == 1 and "#3 all_reduce(tensor: float32[1], reduce_op=SUM) completed" in first.split(" odd")[1]
    assert '<tr class="after">' in table and "(nothing: the rank issued no further collective on this group)" in table
    assert "broadcast" not in table, "only the diverging group is drawn"
    assert PAYLOAD not in html and "document.body.dataset.injected = &#39;notes&#39;" in html  # engine notes, escaped


def test_matching_or_malformed_collectives_draw_no_table():
    a, b = _call(0, "all_reduce", [0, 1], [1]), _call(0, "all_reduce", [0, 1], [2])
    assert collective_table([[a, a], [a, a]]) is None
    assert collective_table([[a, a], [a]])["first"] == 1  # rank 1 stopped issuing: rank 0 waits
    assert collective_table([[b], [a]])["first"] == 0
    assert collective_table([[a | {"seq": 5, "site": "x"}], [a]]) is None  # per-rank seq and call site are not compared
    assert well_formed([[a], []]) and not well_formed([a, a]) and not well_formed([[{"op": "all_reduce", "shape": [1]}]])
