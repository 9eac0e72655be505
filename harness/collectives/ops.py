"""The torch.distributed functions the recorder wraps, the functional collectives it records as their counterparts,
and what every rank of a group must agree on.

Each op names the arguments whose shapes and dtypes are the same on every member of the group in
a correct program (`matched`). Three kinds:

- symmetric collectives (all_reduce, all_gather, reduce_scatter, broadcast, ...): every member
  issues them in the same order, with the same shapes;
- collectives whose shapes may legitimately differ per rank (uneven all_to_all, object
  collectives, the root-only lists of gather/scatter): still issued by every member in the same
  order, but only the op and the group are matched;
- point-to-point ops (send, recv, batch_isend_irecv, ...): pairs of ranks, not matched at all.

A functional collective (`torch.ops._c10d_functional`, what DTensor reduces through) is recorded as the torch.distributed
op it performs, its tensors under that op's parameter names (`FUNCTIONAL_OPS`): an all_reduce is an all_reduce, whichever
API issued it, so the symmetry check and the hang report read both alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class OpSpec:
    matched: tuple[str, ...] = ()  # arguments with the same shapes and dtypes on every member
    point_to_point: bool = False


POINT_TO_POINT = OpSpec(point_to_point=True)

OPS: dict[str, OpSpec] = {
    "all_reduce": OpSpec(("tensor",)),
    "all_reduce_coalesced": OpSpec(("tensors",)),
    "all_gather": OpSpec(("tensor_list", "tensor")),
    "all_gather_coalesced": OpSpec(("output_tensor_lists", "input_tensor_list")),
    "all_gather_into_tensor": OpSpec(("output_tensor", "input_tensor")),
    "all_gather_single": OpSpec(("output_tensor", "input_tensor")),
    "all_gather_into_tensor_coalesced": OpSpec(("output_tensors", "input_tensors")),  # functional only
    "reduce_scatter": OpSpec(("output", "input_list")),
    "reduce_scatter_tensor": OpSpec(("output", "input")),
    "reduce_scatter_single": OpSpec(("output", "input")),
    "reduce_scatter_tensor_coalesced": OpSpec(("outputs", "inputs")),  # functional only
    "all_to_all": OpSpec(),
    "all_to_all_single": OpSpec(),
    "broadcast": OpSpec(("tensor",)),
    "reduce": OpSpec(("tensor",)),
    "gather": OpSpec(("tensor",)),
    "scatter": OpSpec(("tensor",)),
    "barrier": OpSpec(),
    "monitored_barrier": OpSpec(),
    "all_gather_object": OpSpec(),
    "broadcast_object_list": OpSpec(),
    "gather_object": OpSpec(),
    "scatter_object_list": OpSpec(),
    "send": POINT_TO_POINT,
    "recv": POINT_TO_POINT,
    "isend": POINT_TO_POINT,
    "irecv": POINT_TO_POINT,
    "batch_isend_irecv": POINT_TO_POINT,
    "send_object_list": POINT_TO_POINT,
    "recv_object_list": POINT_TO_POINT,
}



@dataclass(frozen=True, slots=True)
class FunctionalOp:
    """How a `torch.ops._c10d_functional` op is recorded: as `op` (an OPS name), each tensor argument of its schema under
    the parameter name `op` has in torch.distributed (`tensors`), its result too where it is a new tensor (`output`,
    listed first, as torch.distributed takes it), and its integer rank arguments under the names `args` gives."""

    op: str
    tensors: dict[str, str]
    output: str | None = None
    args: dict[str, str] = field(default_factory=dict)


FUNCTIONAL_OPS: dict[str, FunctionalOp] = {
    "all_reduce": FunctionalOp("all_reduce", {"input": "tensor"}),
    "all_reduce_": FunctionalOp("all_reduce", {"input": "tensor"}),
    "all_reduce_coalesced": FunctionalOp("all_reduce_coalesced", {"inputs": "tensors"}),
    "all_reduce_coalesced_": FunctionalOp("all_reduce_coalesced", {"inputs": "tensors"}),
    "all_gather_into_tensor": FunctionalOp("all_gather_into_tensor", {"input": "input_tensor"}, output="output_tensor"),
    "all_gather_into_tensor_out": FunctionalOp("all_gather_into_tensor", {"out": "output_tensor", "input": "input_tensor"}),
    "all_gather_into_tensor_coalesced": FunctionalOp("all_gather_into_tensor_coalesced", {"inputs": "input_tensors"},
                                                     output="output_tensors"),
    "reduce_scatter_tensor": FunctionalOp("reduce_scatter_tensor", {"input": "input"}, output="output"),
    "reduce_scatter_tensor_out": FunctionalOp("reduce_scatter_tensor", {"out": "output", "input": "input"}),
    "reduce_scatter_tensor_coalesced": FunctionalOp("reduce_scatter_tensor_coalesced", {"inputs": "inputs"}, output="outputs"),
    "all_to_all_single": FunctionalOp("all_to_all_single", {"input": "input"}, output="output"),
    "broadcast": FunctionalOp("broadcast", {"input": "tensor"}, args={"src": "group_src"}),
    "broadcast_": FunctionalOp("broadcast", {"input": "tensor"}, args={"src": "group_src"}),
    # the peers of the functional point-to-point ops are global ranks (_functional_collectives.isend_inplace)
    "isend": FunctionalOp("isend", {"tensor": "tensor"}, args={"dst": "dst"}),
    "irecv": FunctionalOp("irecv", {"tensor": "tensor"}, args={"src": "src"}),
    "batch_p2p_ops": FunctionalOp("batch_isend_irecv", {"tensors": "p2p_op_list"}),
}

# Integer arguments worth recording: roots and peers (global or group-local ranks), and p2p tags.
RANK_ARGUMENTS = ("src", "dst", "group_src", "group_dst", "tag")


def describe(entry: dict) -> str:
    """One line for a log entry: `all_reduce(tensor: float64[4]) on group [0, 1], seq 3, at f.py:40 in run`."""
    tensors = ", ".join(f"{t['arg']}: {t['dtype']}{t['shape']}" for t in entry["tensors"])
    extra = "".join(f", {k}={v}" for k, v in entry.get("args", {}).items())
    site = f", at {entry['site']}" if entry.get("site") else ""
    return f"{entry['op']}({tensors}{extra}) on group {entry['group']}, seq {entry['seq']}{site}"


STATE_WORDS = {
    "entered": "waiting in",
    "completed": "completed",
    "async": "issued asynchronously (completion not observable)",
    "failed": "failed in",
}


def describe_state(entry: dict) -> str:
    """`waiting in all_reduce(...)`: the entry with what the rank was doing about it."""
    words = STATE_WORDS.get(entry["state"], entry["state"])
    error = f": {entry['error']}" if entry.get("error") else ""
    return f"{words} {describe(entry)}{error}"
