"""Recording the functional collectives (DTensor, FSDP2's `full_tensor`, torchtitan): the ops of `torch.ops._c10d_functional`.

Every eager path to a functional collective ends in a call of one of these ops from Python: the functions of
`torch.distributed._functional_collectives` (which DTensor's placements call), the backward collectives of those ops'
autograd formulas (`all_reduce_backward` calls `torch.ops._c10d_functional.all_reduce` itself), the legacy
`c10d_functional` ops, Inductor's generated code. Such a call goes through the op object's `_op` (OpOverloadPacket and
OpOverload both call `self._op(*args)`): the recorder swaps that attribute of each op object for a recording function and
puts it back on uninstall. The op objects stay the same objects (dispatch tables, FX and dispatch modes compare them by
identity) and no other op pays anything.

Not chosen: wrapping `_functional_collectives`' module functions (DTensor calls them by attribute, but the backward
collectives their autograd formulas issue call the ops directly, unseen); a TorchDispatchMode (Python on every aten op,
pushed per thread, and in torch.compile's way).

A functional collective returns before it completes: it is logged "async" once issued, "entered" while a `wait_tensor`
on its result blocks (a hang report's "waiting in all_reduce(...)", with `wait_site`), "completed" when every result's
wait has returned. Not recorded: calls while torch.compile traces (`torch.compiler.is_compiling()`: it runs the ops on
fake tensors; a compiled graph's collectives are recorded when it runs them), and C++ callers of the ops
(`torch.ops._dtensor.shard_dim_alltoall`: DTensor's Shard(i) -> Shard(j) on CUDA).
"""

from __future__ import annotations

import functools
import threading
from typing import Callable, Protocol

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from packcheck.harness.collectives.entries import call_site, tensor_field
from packcheck.harness.collectives.ops import FUNCTIONAL_OPS, FunctionalOp

NAMESPACE = "_c10d_functional"


class Log(Protocol):
    """What the functional recorder needs of the collective recorder (recorder.py)."""

    depth: threading.local  # depth.value > 0: inside a recorded call; nested calls are part of it
    lock: threading.Lock

    def append(self, entry: dict) -> dict: ...
    def inside(self, entry: dict, original: Callable, *args, **kwargs): ...
    def finish(self, entry: dict, state: str, error: str | None = None) -> None: ...


class FunctionalRecorder:
    def __init__(self, log: Log) -> None:
        self._log = log
        self._results: dict[int, dict] = {}  # storage of a result not yet waited on -> its entry
        self._open: dict[int, int] = {}  # id(entry) -> its results not yet waited on
        self._swapped: list[tuple[object, Callable]] = []

    def forget(self) -> None:
        """A new case: results issued before it are no longer followed (call under the log's lock)."""
        self._results, self._open = {}, {}

    def install(self) -> FunctionalRecorder:
        namespace = getattr(torch.ops, NAMESPACE)
        for name in [*FUNCTIONAL_OPS, "wait_tensor"]:
            try:
                packet = getattr(namespace, name)
            except (AttributeError, RuntimeError):  # not in this torch build
                continue
            names = [a.name for a in packet.default._schema.arguments]
            for op in (packet, packet.default):
                original = op._op
                op._op = self._waits(original) if name == "wait_tensor" else self._issues(name, FUNCTIONAL_OPS[name], names, original)
                self._swapped.append((op, original))
        return self

    def uninstall(self) -> None:
        for op, original in self._swapped:
            op._op = original
        self._swapped = []

    # -- issue and wait --------------------------------------------------------------------

    def _issues(self, name: str, spec: FunctionalOp, names: list[str], original: Callable) -> Callable:
        log = self._log

        @functools.wraps(original)
        def recorded(*args, **kwargs):
            if torch.compiler.is_compiling() or getattr(log.depth, "value", 0) > 0:
                return original(*args, **kwargs)
            arguments = dict(zip(names, args)) | kwargs
            entry = log.append(_entry(name, spec, arguments))
            out = log.inside(entry, original, *args, **kwargs)
            self._issued(entry, spec, out)
            return out

        return recorded

    def _issued(self, entry: dict, spec: FunctionalOp, out) -> None:
        results = list(out) if isinstance(out, (list, tuple)) else [out]
        if spec.output is not None:
            entry["tensors"][:0] = [tensor_field(f"{spec.output}[{i}]" if isinstance(out, (list, tuple)) else spec.output,
                                                 spec.output, t) for i, t in enumerate(results)]
        with self._log.lock:
            keys = [key for key in map(_storage, results) if key is not None]
            self._results.update(dict.fromkeys(keys, entry))
            self._open[id(entry)] = len(keys)
            entry["state"] = "async"

    def _waits(self, original: Callable) -> Callable:
        log = self._log

        @functools.wraps(original)
        def waited(tensor, *args, **kwargs):
            if torch.compiler.is_compiling() or getattr(log.depth, "value", 0) > 0:
                return original(tensor, *args, **kwargs)
            key = _storage(tensor)
            with log.lock:
                entry = None if key is None else self._results.pop(key, None)
            if entry is None:  # issued before this case, or not by a recorded op
                return original(tensor, *args, **kwargs)
            entry["wait_site"] = call_site()
            log.finish(entry, "entered")
            out = log.inside(entry, original, tensor, *args, **kwargs)
            with log.lock:
                self._open[id(entry)] = left = self._open.get(id(entry), 1) - 1
            log.finish(entry, "async" if left > 0 else "completed")
            return out

        return waited


def _storage(t: torch.Tensor) -> int | None:
    """The result's storage (a view or an AsyncCollectiveTensor's inner tensor shares it): what a wait is matched by."""
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):  # a tensor without storage: its wait is not followed
        return None


def _entry(name: str, spec: FunctionalOp, arguments: dict) -> dict:
    tensors: list[dict] = []
    for param, recorded_as in spec.tensors.items():
        value = arguments.get(param)
        if isinstance(value, torch.Tensor):
            tensors.append(tensor_field(recorded_as, recorded_as, value))
        elif name == "batch_p2p_ops":  # named as batch_isend_irecv's: "isend peer 3", with the peer's global rank
            tensors += [tensor_field(f"{op} peer {peer}", recorded_as, t) | {"peer": peer}
                        for op, peer, t in zip(arguments["op_list"], arguments["peer_list"], value)]
        elif isinstance(value, (list, tuple)):
            tensors += [tensor_field(f"{recorded_as}[{i}]", recorded_as, t) for i, t in enumerate(value)]
    args = {recorded_as: int(arguments[param]) for param, recorded_as in spec.args.items() if param in arguments}
    if isinstance(arguments.get("reduce_op"), str):
        args["reduce_op"] = arguments["reduce_op"].upper()  # "sum" as torch.distributed's ReduceOp.SUM is named
    return {"seq": 0, "op": spec.op, "via": f"{NAMESPACE}.{name}", "group": group_ranks(arguments.get("group_name")),
            "tensors": tensors, "args": args, "async": True, "state": "entered", "site": call_site()}


def group_ranks(group) -> list[int]:
    """The global ranks of the group a functional op names. `_functional_collectives` resolves every form a caller may
    give (a ProcessGroup, a DeviceMesh and a dim, a list of ranks, a group name) to a group name before the op; a
    ProcessGroup itself reaches the op under `dist.config.compile_on_one_rank`."""
    try:
        if not isinstance(group, dist.ProcessGroup):
            group = c10d._resolve_process_group(group)
        return list(dist.get_process_group_ranks(group))
    except (RuntimeError, ValueError, TypeError):  # an unknown name: the op raises its own error
        return []
