"""A failing check's case on disk, for `packcheck replay`: the shrunk batch (safetensors), the model's weights
(transformers' save_pretrained, or a state dict beside the factory that builds the model), and the check's verdict, in
one folder with case.json. No pickle; nothing of the user's run is read back into it.

    CASE_DIR/case.json           schema packcheck.guard-case/1: the verdict, the model's class or factory, the step, dtype
    CASE_DIR/batch.safetensors   the batch's tensors; its other entries (use_cache, max_length_q) in case.json
    CASE_DIR/model/              the weights as the check saw them
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from packcheck.guard.judge import GuardVerdict
from packcheck.guard.runs import Step, model_step

SCHEMA = "packcheck.guard-case/1"


def reference(thing) -> str | None:
    """"module:qualname" of a function or class the replay can import, or None (a lambda, a closure, __main__'s)."""
    module, name = getattr(thing, "__module__", None), getattr(thing, "__qualname__", "")
    if not module or module == "__main__" or "<" in name:
        return None
    return f"{module}:{name}"


def imported(ref: str):
    module, _, name = ref.partition(":")
    found = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found


def write_case(directory: str | Path, model: nn.Module, batch: Mapping[str, object], step: Step, verdict: GuardVerdict,
               factory: str | None = None) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().clone() for k, v in batch.items() if isinstance(v, torch.Tensor)}  # clone: TRL shares cu_seq_lens_q/k
    save_file(tensors, str(directory / "batch.safetensors"))
    if hasattr(model, "save_pretrained"):
        model.save_pretrained(str(directory / "model"), safe_serialization=True)
        weights = {"class": reference(type(model)), "format": "save_pretrained",
                   "attention": getattr(getattr(model, "config", None), "_attn_implementation", None)}
    else:
        (directory / "model").mkdir(exist_ok=True)
        save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}, str(directory / "model" / "model.safetensors"))
        weights = {"factory": factory, "format": "state_dict"}
    case = {"schema": SCHEMA, "verdict": verdict.to_json(), "model": weights, "step": None if step is model_step else reference(step),
            "custom_step": step is not model_step, "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
            "device": str(next(model.parameters()).device),
            "batch_other": {k: v for k, v in batch.items() if not isinstance(v, torch.Tensor) and isinstance(v, (int, float, bool, str))}}
    path = directory / "case.json"
    path.write_text(json.dumps(case, indent=1), encoding="utf-8")
    return path


def is_guard_case(path: str | Path) -> bool:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8")).get("schema") == SCHEMA
    except (OSError, ValueError, AttributeError):
        return False


def read_case(path: str | Path, device: str | None = None) -> tuple[nn.Module, dict, Step, dict]:
    """The case's model (on `device`, default the one it was found on where this machine has it), batch, step and JSON.
    A step or model class that cannot be imported here raises CaseProblem naming it."""
    path = Path(path)
    case = json.loads(path.read_text(encoding="utf-8"))
    dtype = getattr(torch, case["dtype"])
    device = device or (case["device"] if not case["device"].startswith("cuda") or torch.cuda.is_available() else "cpu")
    weights = case["model"]
    folder = path.parent / "model"
    if weights["format"] == "save_pretrained":
        if not weights.get("class"):
            raise CaseProblem(f"{path}: the model's class was not importable when the case was written")
        cls = _import(weights["class"], "model class", path)
        extra = {"attn_implementation": weights["attention"]} if weights.get("attention") else {}
        model = cls.from_pretrained(str(folder), **extra).to(device=device, dtype=dtype)
    else:
        if not weights.get("factory"):
            raise CaseProblem(f"{path}: the model is no transformers model and the guard was given no model_factory "
                              "('module:function' returning the model): the case cannot rebuild it")
        model = _import(weights["factory"], "model factory", path)()
        model.load_state_dict(load_file(str(folder / "model.safetensors")))
        model = model.to(device=device, dtype=dtype)
    batch: dict = {k: v.to(device) for k, v in load_file(str(path.parent / "batch.safetensors")).items()}
    batch |= case.get("batch_other", {})
    if case.get("custom_step") and not case.get("step"):
        raise CaseProblem(f"{path}: the check ran a step that cannot be imported (a lambda or a closure): give the guard a "
                          "module-level function to make its cases replayable")
    step = _import(case["step"], "step", path) if case.get("step") else model_step
    return model, batch, step, case


class CaseProblem(ValueError):
    """A guard case that cannot be replayed here: the message names what is missing and the fix."""


def _import(ref: str, what: str, path: Path):
    try:
        return imported(ref)
    except (ImportError, AttributeError) as err:
        raise CaseProblem(f"{path}: the {what} {ref} does not import here ({err}); run the replay where it does") from err
