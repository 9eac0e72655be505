"""The per-rank collective recorder: every collective a rank issues, in order, as JSON.

`install_recorder()` replaces the public collective and point-to-point functions of
torch.distributed (the names in `ops.OPS`) with wrappers that log each call, then call the
original, and records the functional collectives (DTensor's) where they are issued and waited
on (functional.py). The same wrapper object goes into `torch.distributed` and
`torch.distributed.distributed_c10d`, so identity checks inside torch (P2POp's op check) still
hold. Install it before the engine is imported, so that an engine doing
`from torch.distributed import all_reduce` binds the wrapper too. Only the outermost call is
logged: the all_gathers inside all_gather_object are part of that one entry.

One entry per call:
    seq      position in this rank's log since `start_case()` (0, 1, ...)
    op       function name, e.g. "all_reduce"
    group    global ranks of the process group (every rank for the default group)
    tensors  [{"arg": "tensor_list[1]", "param": "tensor_list", "shape": [4], "dtype": "float64"}, ...] in argument
             order: "arg" names the tensor for people, "param" is the argument it came in; a batch_isend_irecv's
             tensors are named "isend peer 3" and carry their "peer" (a global rank)
    args     roots, peers, tags and the reduce op when given: {"dst": 1, "reduce_op": "SUM"}
    async    async_op=True, an isend/irecv, or batch_isend_irecv
    state    "entered" -> "completed" | "failed"; asynchronous calls go "async" -> "completed" when
             their work completes (observed through the work's future, or polled in `snapshot()`)
    site     "path:line in function" of the first caller outside torch
    error    the exception text, when the call raised
    via      a functional collective's op, e.g. "_c10d_functional.all_reduce" (`op` is the
             torch.distributed op it performs); wait_site: where its result was waited on

Nothing is recorded while torch.compile traces (`torch.compiler.is_compiling()`): the wrappers
step aside, so a compiled region traces as it would without them. "completed" means the call
returned to Python: on NCCL, that the collective was enqueued on the stream.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Callable

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from packcheck.harness.collectives.entries import call_site, tensor_field
from packcheck.harness.collectives.functional import FunctionalRecorder
from packcheck.harness.collectives.ops import OPS, RANK_ARGUMENTS

_active: CollectiveRecorder | None = None


class CollectiveRecorder:
    def __init__(self) -> None:
        self.log: list[dict] = []
        self.lock = threading.Lock()
        self.depth = threading.local()  # depth.value > 0: inside a recorded call; the calls it makes are part of it
        self._unobserved: dict[int, list] = {}  # seq -> in-flight works without a future, polled
        self._originals: dict[str, Callable] = {}
        self._functional = FunctionalRecorder(self)

    # -- the log ---------------------------------------------------------------------------

    def start_case(self) -> None:
        """Begin a new log (seq restarts at 0)."""
        with self.lock:
            self.log = []
            self._unobserved = {}
            self._functional.forget()

    def snapshot(self) -> list[dict]:
        """A copy of the log, with the completion of unobserved asynchronous works polled now."""
        with self.lock:
            self._poll_unobserved()
            return [dict(entry) for entry in self.log]

    def _poll_unobserved(self) -> None:
        for seq, works in list(self._unobserved.items()):
            if all(_is_completed(w) for w in works):
                self.log[seq]["state"] = "completed"
                del self._unobserved[seq]

    # -- installing ------------------------------------------------------------------------

    def install(self) -> CollectiveRecorder:
        global _active
        if _active is not None:
            raise RuntimeError("a collective recorder is already installed in this process")
        for name in OPS:
            original = getattr(c10d, name, None)
            if original is None:  # not in this torch version
                continue
            self._originals[name] = original
            wrapper = self._wrap(name, original)
            setattr(c10d, name, wrapper)
            if getattr(dist, name, None) is original:
                setattr(dist, name, wrapper)
        self._functional.install()
        _active = self
        return self

    def uninstall(self) -> None:
        global _active
        for name, original in self._originals.items():
            if getattr(dist, name, None) is getattr(c10d, name):
                setattr(dist, name, original)
            setattr(c10d, name, original)
        self._originals = {}
        self._functional.uninstall()
        _active = None

    def __enter__(self) -> CollectiveRecorder:
        return self if _active is self else self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()

    # -- recording -------------------------------------------------------------------------

    def _wrap(self, name: str, original: Callable) -> Callable:
        signature = inspect.signature(original)

        @functools.wraps(original)
        def recorded(*args, **kwargs):
            if torch.compiler.is_compiling() or getattr(self.depth, "value", 0) > 0:
                return original(*args, **kwargs)
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:  # let the original raise its own message
                return original(*args, **kwargs)
            bound.apply_defaults()
            entry = self._enter(name, bound.arguments)
            out = self.inside(entry, original, *args, **kwargs)
            self._settle(entry, out)
            return out

        return recorded

    def _enter(self, name: str, arguments: dict) -> dict:
        return self.append({
            "seq": 0,
            "op": name,
            "group": _group_ranks(arguments),
            "tensors": _tensors(name, arguments),
            "args": _rank_arguments(arguments),
            "async": bool(arguments.get("async_op")) or name in ("isend", "irecv", "batch_isend_irecv"),
            "state": "entered",
            "site": call_site(),
        })

    def append(self, entry: dict) -> dict:
        """Log a new entry at the next seq."""
        with self.lock:
            entry["seq"] = len(self.log)
            self.log.append(entry)
        return entry

    def inside(self, entry: dict, original: Callable, *args, **kwargs):
        """`original(*args, **kwargs)` as the call `entry` logs: the calls it makes are part of it; a raise fails it."""
        self.depth.value = 1
        try:
            return original(*args, **kwargs)
        except BaseException as err:
            self.finish(entry, "failed", error=f"{type(err).__name__}: {err}")
            raise
        finally:
            self.depth.value = 0

    def finish(self, entry: dict, state: str, error: str | None = None) -> None:
        with self.lock:
            entry["state"] = state
            if error is not None:
                entry["error"] = error

    def _settle(self, entry: dict, out) -> None:
        """Completed now, or (asynchronous) when its work completes."""
        works = out if isinstance(out, list) else [out]
        works = [w for w in works if isinstance(w, c10d.Work)]
        if not entry["async"] or not works:
            self.finish(entry, "completed")
            return
        self.finish(entry, "async")
        if len(works) == 1:
            try:
                works[0].get_future().then(functools.partial(self._future_done, entry))
                return
            except RuntimeError:  # gloo's point-to-point works have no future
                pass
        with self.lock:
            self._poll_unobserved()  # holds only works still in flight: they keep their tensors alive
            self._unobserved[entry["seq"]] = works

    def _future_done(self, entry: dict, future) -> None:
        try:
            future.value()
        except Exception as err:  # noqa: BLE001 - recorded, the caller's wait() raises it
            self.finish(entry, "failed", error=f"{type(err).__name__}: {err}")
        else:
            self.finish(entry, "completed")


def install_recorder() -> CollectiveRecorder:
    """Install a recorder for this process (once) and return it."""
    return CollectiveRecorder().install()


def _is_completed(work) -> bool:
    try:
        return bool(work.is_completed())
    except RuntimeError:
        return False


def _group_ranks(arguments: dict) -> list[int]:
    group = arguments.get("group")
    if group is None and arguments.get("p2p_op_list"):
        group = arguments["p2p_op_list"][0].group
    if group is None or group is c10d.GroupMember.WORLD:
        return list(range(dist.get_world_size()))
    try:
        return list(dist.get_process_group_ranks(group))
    except (RuntimeError, ValueError):  # a group this rank is not a member of
        return []


def _tensors(name: str, arguments: dict) -> list[dict]:
    if name == "batch_isend_irecv":
        return [tensor_field(f"{p.op.__name__} peer {p.peer}", "p2p_op_list", p.tensor) | {"peer": p.peer} for p in arguments["p2p_op_list"]]
    found: list[dict] = []
    for arg, value in arguments.items():
        _collect(arg, arg, value, found)
    return found


def _collect(param: str, path: str, value, found: list[dict]) -> None:
    if isinstance(value, torch.Tensor):
        found.append(tensor_field(path, param, value))
    elif isinstance(value, (list, tuple)) and value and any(isinstance(v, (torch.Tensor, list, tuple)) for v in value):
        for i, item in enumerate(value):
            _collect(param, f"{path}[{i}]", item, found)


def _rank_arguments(arguments: dict) -> dict:
    found = {k: int(arguments[k]) for k in RANK_ARGUMENTS if isinstance(arguments.get(k), int) and (k != "tag" or arguments[k])}
    reduce_op = arguments.get("op")
    if isinstance(reduce_op, (dist.ReduceOp, dist.ReduceOp.RedOpType)):
        found["reduce_op"] = getattr(reduce_op, "name", None) or type(reduce_op).__name__
    return found
