"""The collective recorder logs every torch.distributed call once, in order, with its group,
shapes, dtypes, state and call site; first_divergence finds where ranks stop matching.

The recorder runs on a real one-rank gloo group in this process; multi-rank logs from real
launches are checked in test_launch.py.
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from packcheck.harness.collectives import CollectiveRecorder, describe, first_divergence


@pytest.fixture(scope="module")
def process_group(tmp_path_factory):
    store = tmp_path_factory.mktemp("store") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.fixture
def recorder(process_group):
    with CollectiveRecorder() as recorder:
        recorder.start_case()
        yield recorder


def test_each_call_is_logged_once_in_order_with_group_shapes_dtypes_and_site(recorder):
    x_D = torch.ones(4, dtype=torch.float64)
    dist.all_reduce(x_D, op=dist.ReduceOp.MAX)
    dist.all_gather([torch.zeros(4, dtype=torch.float64)], x_D)
    dist.all_gather_into_tensor(torch.zeros(4), torch.ones(4))  # torch runs all_gather_single inside: one entry
    dist.broadcast(x_D, src=0)
    objects = [None]
    dist.all_gather_object(objects, {"any": "object"})  # all_gathers inside: one entry
    dist.barrier()
    log = recorder.snapshot()
    assert [e["op"] for e in log] == ["all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "all_gather_object", "barrier"]
    assert [e["seq"] for e in log] == list(range(6))
    assert all(e["group"] == [0] and e["state"] == "completed" and not e["async"] for e in log)
    assert log[0]["tensors"] == [{"arg": "tensor", "param": "tensor", "shape": [4], "dtype": "float64"}]
    assert log[0]["args"] == {"reduce_op": "MAX"}
    assert [t["arg"] for t in log[1]["tensors"]] == ["tensor_list[0]", "tensor"]
    assert log[2]["tensors"][1] == {"arg": "input_tensor", "param": "input_tensor", "shape": [4], "dtype": "float32"}
    assert log[3]["args"] == {"src": 0}
    assert log[0]["site"].startswith("tests/test_collectives.py:") and log[0]["site"].endswith("in test_each_call_is_logged_once_in_order_with_group_shapes_dtypes_and_site")
    assert describe(log[0]).startswith("all_reduce(tensor: float64[4], reduce_op=MAX) on group [0], seq 0, at tests/test_collectives.py:")


def test_a_subgroup_is_logged_by_its_global_ranks(recorder):
    group = dist.new_group([0])
    dist.all_reduce(torch.ones(2), group=group)
    assert recorder.snapshot()[0]["group"] == [0]


def test_an_async_collective_completes_when_its_work_does(recorder):
    work = dist.all_reduce(torch.ones(3), async_op=True)
    work.wait()
    deadline = time.monotonic() + 2.0
    while recorder.snapshot()[0]["state"] != "completed" and time.monotonic() < deadline:
        time.sleep(0.01)  # the work's future runs its callback just after waking the waiter
    entry = recorder.snapshot()[0]
    assert entry["async"] and entry["state"] == "completed"


def test_a_call_that_raises_is_logged_as_failed_and_still_raises(recorder):
    with pytest.raises((ValueError, RuntimeError)):
        dist.broadcast(torch.ones(1), src=5)  # no rank 5 in a world of 1
    entry = recorder.snapshot()[0]
    assert entry["op"] == "broadcast" and entry["state"] == "failed" and entry["error"]


def test_start_case_begins_a_new_log(recorder):
    dist.barrier()
    recorder.start_case()
    dist.all_reduce(torch.ones(1))
    assert [(e["seq"], e["op"]) for e in recorder.snapshot()] == [(0, "all_reduce")]


def test_code_importing_after_install_binds_the_recording_functions_and_uninstall_restores(process_group):
    original = dist.all_reduce
    with CollectiveRecorder() as recorder:
        from torch.distributed import all_reduce, isend

        assert all_reduce is not original and all_reduce is c10d.all_reduce
        assert isend is c10d.isend, "one wrapper in both modules: P2POp's `op in [isend, irecv]` check still holds"
        all_reduce(torch.ones(1))
        assert len(recorder.snapshot()) == 1
    assert dist.all_reduce is original and c10d.all_reduce is original


def test_a_second_recorder_is_refused(recorder):
    with pytest.raises(RuntimeError, match="already installed"):
        CollectiveRecorder().install()


# -- first_divergence -------------------------------------------------------------------------
# Logs as the recorder writes them, for a world of 2 or 4 ranks.

def entry(seq: int, op: str, group: list[int], *shapes: list[int], dtype: str = "float64", arg: str = "tensor", **args) -> dict:
    tensors = [{"arg": arg if len(shapes) == 1 else f"{arg}[{i}]", "param": arg, "shape": s, "dtype": dtype} for i, s in enumerate(shapes)]
    return {"seq": seq, "op": op, "group": group, "tensors": tensors, "args": args, "async": False, "state": "completed", "site": "engine.py:1 in step"}


def test_matching_logs_have_no_divergence():
    log = [entry(0, "all_reduce", [0, 1], [4], reduce_op="SUM"), entry(1, "all_gather", [0, 1], [2], [2], [2], arg="tensor_list")]
    assert first_divergence([log, [dict(e) for e in log]]) is None


def test_a_skipped_collective_is_named_with_the_rank_that_issued_it():
    rank0 = [entry(0, "all_reduce", [0, 1], [4]), entry(1, "all_gather", [0, 1], [8])]
    rank1 = [entry(0, "all_reduce", [0, 1], [4])]
    message = first_divergence([rank0, rank1])
    assert message.startswith("group [0, 1], collective #1 on that group:")
    assert "rank 0 issued all_gather(tensor: float64[8]) on group [0, 1], seq 1" in message
    assert "rank 1 issued none (it issued 1 collectives on this group)" in message


@pytest.mark.parametrize(("change", "what"), [
    ({"shape": [5]}, "float64[5]"),
    ({"dtype": "float32"}, "float32[4]"),
    ({"op": "reduce_scatter_tensor"}, "reduce_scatter_tensor("),
    ({"args": {"reduce_op": "MAX"}}, "reduce_op=MAX"),
])
def test_a_different_shape_dtype_op_or_reduce_op_diverges(change, what):
    rank0 = [entry(0, "all_reduce", [0, 1], [4], reduce_op="SUM")]
    other = entry(0, "all_reduce", [0, 1], [4], reduce_op="SUM")
    other["tensors"][0] = {**other["tensors"][0], **{k: v for k, v in change.items() if k in ("shape", "dtype")}}
    other.update({k: v for k, v in change.items() if k in ("op", "args")})
    message = first_divergence([rank0, [other]])
    assert message is not None and f"rank 1 issued {other['op']}" in message and what in message


def test_point_to_point_and_uneven_all_to_all_shapes_are_not_asymmetries():
    rank0 = [entry(0, "send", [0, 1], [3], dst=1), entry(1, "all_to_all_single", [0, 1], [6], [2], arg="output")]
    rank1 = [entry(0, "recv", [0, 1], [3], src=0), entry(1, "all_to_all_single", [0, 1], [2], [6], arg="output")]
    assert first_divergence([rank0, rank1]) is None


def test_each_group_is_compared_among_its_own_members_and_the_earliest_divergence_wins():
    # dp x cp = 2 x 2: cp groups [0, 1], [2, 3]; dp groups [0, 2], [1, 3]. Ranks may interleave groups differently.
    cp01 = entry(0, "all_to_all", [0, 1], [4])
    cp23 = entry(0, "all_to_all", [2, 3], [4])
    logs = [
        [cp01, entry(1, "all_reduce", [0, 2], [1])],
        [entry(0, "all_reduce", [1, 3], [1]), {**cp01, "seq": 1}],
        [cp23, entry(1, "all_reduce", [0, 2], [1])],
        [cp23, entry(1, "all_reduce", [1, 3], [2])],  # rank 3's dp all_reduce has the wrong shape
    ]
    assert first_divergence(logs).startswith("group [1, 3], collective #0")
    logs[2] = [cp23]  # rank 2 also skips its dp all_reduce (seq 1), which rank 0 issued at seq 1
    assert first_divergence(logs).startswith("group [1, 3], collective #0"), "rank 1's seq 0 comes before rank 0's seq 1"


# -- unused_mesh under expert parallelism ------------------------------------------------------

def test_an_expert_parallel_rank_without_an_all_to_all_with_its_ep_peers_is_flagged():
    from packcheck.harness.collectives import unused_mesh
    from packcheck.harness.contract import ParallelPlan

    plan = ParallelPlan(dp=4, ep=2)  # EP groups [0, 1], [2, 3]; expert-dp groups [0, 2], [1, 3]
    reduce_all = lambda rank: entry(0, "all_reduce", [0, 1, 2, 3], [4])  # noqa: E731
    dispatch = {0: [0, 1], 1: [0, 1], 2: [2, 3], 3: [2, 3]}
    logs = [[reduce_all(r), entry(1, "all_to_all_single", dispatch[r], [6], arg="output")] for r in range(4)]
    assert unused_mesh(plan, 2, logs) == []
    logs[3] = [reduce_all(3), entry(1, "all_to_all_single", [1, 3], [6], arg="output")]  # an all-to-all, but with an expert-dp peer
    problems = unused_mesh(plan, 2, logs)
    assert len(problems) == 1 and problems[0].startswith("rank 3 sent no token to its expert-parallel peers [2]")
    assert unused_mesh(ParallelPlan(dp=4), 2, [[reduce_all(r)] for r in range(4)]) == [], "no EP: no token exchange is needed"
