"""The fields of a log entry that both recorders (torch.distributed's functions, the functional collectives) write alike:
a tensor's description and the call site."""

from __future__ import annotations

import os
import sys

import torch

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# where the process started (the run's directory): call sites read relative to it, wherever an engine moves the cwd
_START_DIR = os.getcwd()
# a mode's hook passes every torch call on (packcheck's TokenMeter wraps an engine's `loss.backward()`): not the caller
_PASSING_ON = ("__torch_function__", "__torch_dispatch__")


def tensor_field(arg: str, param: str, t: torch.Tensor) -> dict:
    """`arg` names the tensor for people ("tensor_list[1]"), `param` is the argument it came in."""
    return {"arg": arg, "param": param, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}


def call_site() -> str:
    """"path:line in function" of the first caller outside torch and this package, a mode's hook skipped."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename.startswith((_TORCH_DIR, _HERE)) or frame.f_code.co_name in _PASSING_ON):
        frame = frame.f_back
    if frame is None:
        return ""
    path = frame.f_code.co_filename
    relative = os.path.relpath(path, _START_DIR) if path.startswith(_START_DIR + os.sep) else path
    return f"{relative}:{frame.f_lineno} in {frame.f_code.co_name}"
