"""A result that stays on the GPU: rank 0 hands its tensors to the harness through CUDA IPC, not through the host.

At 0.6b an arm's gradients are 1.2 GiB in bf16 (16 GiB at 8B). Written to safetensors by the rank and read back
by the harness they cost 0.57 s of the rank's time per arm and the disk they fill (docs/performance.md). On a
CUDA run rank 0 instead shares each storage its result's tensors live in (`share`): result.json as always, and
result.device.json naming, for every tensor, its storage's IPC handle and its place in that storage. The harness
opens the handles (`open_shared`) and copies each gradient and parameter into memory of its own on the same GPU
(a device-to-device copy, a few milliseconds at 0.6b; the small per-token tensors come to the host, and so do the
gradients of a verdict's arms beyond the harness's share of the GPU, RESULTS_SHARE), so that nothing the engine's
process does afterwards changes what the harness judges; the rank's memory is freed once the harness has let go of it (torch's IPC reference
counting: the rank keeps a shared block until its counter drops).

The descriptors are JSON (handles in base64): nothing is unpickled. Tensors the engine returned on the host go through a
small safetensors file beside them; a result with no tensor on a CUDA device (every CPU run) is saved to disk as always.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from packcheck.harness.contract import StepResult
from packcheck.harness.contract.result import read_meta

DESCRIPTORS = "result.device.json"
HOST_TENSORS = "result.host.safetensors"  # what the engine returned on the host (log-probs, often): small, through the disk
SCHEMA = "packcheck.device_result/1"
# At most this share of the GPU holds the harness's copies of a verdict's results (0.6b: 12 arms of 1.4 GiB on an
# H200). Holding all of rl_loss_aggregation's (25.9 GiB) ran the reference's next arm out of memory (2026-12-02,
# docs/gpu.md): the rest waits on the host, and its comparisons run there.
RESULTS_SHARE = 1 / 8
HOST_RESERVE = 8 << 30  # host memory a result never takes: the ranks' own and the page cache the next arm loads its checkpoint from


def is_shared(directory: Path) -> bool:
    return (directory / DESCRIPTORS).exists()


def shareable(result: StepResult) -> bool:
    """Some tensor on a CUDA device, all of those on one device and strided (what CUDA IPC can hand over)."""
    on_device = [t for t in result.tensors().values() if t.is_cuda]
    return bool(on_device) and all(t.layout == torch.strided for t in on_device) and len({t.device for t in on_device}) == 1


def share(result: StepResult, directory: Path) -> None:
    """Rank 0's side: result.json and the IPC descriptors of `result`'s tensors, each storage shared once."""
    directory.mkdir(parents=True, exist_ok=True)
    storages: dict[int, int] = {}
    shared, tensors = [], {}
    everything = result.tensors()
    # gradients and parameters are what is large, and they meet only each other (and a golden) in a judge; the
    # per-token and per-expert tensors are small and meet the harness's own host tensors in every judge
    large = {id(t) for t in (*result.grads.values(), *(result.params_after or {}).values())}
    save_file({k: t.detach().contiguous() for k, t in everything.items() if not t.is_cuda}, str(directory / HOST_TENSORS))
    for name, tensor in everything.items():
        if not tensor.is_cuda:
            continue
        tensor = tensor.detach()
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in storages:
            storages[key] = len(shared)
            shared.append(_share_storage(storage))
        tensors[name] = {"storage": storages[key], "stays_on_device": id(everything[name]) in large, "dtype": str(tensor.dtype).removeprefix("torch."),
                         "shape": list(tensor.shape), "stride": list(tensor.stride()), "offset": tensor.storage_offset()}
    (directory / DESCRIPTORS).write_text(json.dumps({"schema": SCHEMA, "storages": shared, "tensors": tensors}))
    (directory / "result.json").write_text(json.dumps(result.meta(), indent=1))


def open_shared(directory: Path) -> StepResult:
    """The harness's side: the result rank 0 shared, its tensors copied into this process's own memory on the GPU."""
    described = json.loads((directory / DESCRIPTORS).read_text())
    if described.get("schema") != SCHEMA:
        raise ValueError(f"{directory}/{DESCRIPTORS} has schema {described.get('schema')!r}, expected {SCHEMA!r}")
    storages = [_open_storage(s) for s in described["storages"]]
    tensors = load_file(str(directory / HOST_TENSORS))
    for name, place in described["tensors"].items():
        storage = storages[place["storage"]]
        view = torch.empty(0, dtype=getattr(torch, place["dtype"]), device=storage.device)
        view.set_(storage, place["offset"], place["shape"], place["stride"])
        tensors[name] = _own_copy(view) if place["stays_on_device"] else view.cpu()
    torch.cuda.current_stream().synchronize()  # the copies are made before the rank's memory is let go
    return StepResult.from_parts(read_meta(directory), tensors, str(directory))


def _own_copy(view: torch.Tensor) -> torch.Tensor:
    """`view` copied into this process's GPU memory while the results it holds stay within RESULTS_SHARE of the GPU,
    else into host memory: the engine's next arm needs the GPU more than the harness does. Slower to compare there,
    never an engine starved of memory or a failed run."""
    budget = torch.cuda.get_device_properties(view.device).total_memory * RESULTS_SHARE
    if torch.cuda.memory_allocated(view.device) + view.nbytes > budget:
        return _host_copy(view)
    try:
        return view.clone()
    except torch.OutOfMemoryError:
        return _host_copy(view)


class NoRoomForResult(RuntimeError):
    """The harness cannot hold an arm's result on the GPU (its share) nor on the host: the case is an error that says
    so, where the kernel's out-of-memory killer would otherwise end the whole run (8B: 16 GB a result)."""


def available_host_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (None where there is none: not checked)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _host_copy(view: torch.Tensor) -> torch.Tensor:
    available = available_host_bytes()
    if available is not None and view.nbytes > available - HOST_RESERVE:
        held = torch.cuda.memory_allocated(view.device) if view.is_cuda else 0
        raise NoRoomForResult(
            f"the harness cannot hold this arm's result: a {view.nbytes / 1e9:.1f} GB tensor does not fit its share of the GPU "
            f"({RESULTS_SHARE:.3g} of it, {held / 1e9:.1f} GB held) nor the host "
            f"({available / 1e9:.1f} GB available, {HOST_RESERVE / 2**30:.0f} GiB kept for the engine); the verdict holds every arm's result until it is judged, and at this "
            "--model that is more than the machine holds: run this scenario at a smaller --model or on a machine with more memory")
    return view.cpu()


def _share_storage(storage: torch.UntypedStorage) -> dict:
    (device, handle, size_bytes, offset_bytes, counter_handle, counter_offset,
     event_handle, event_sync_required) = storage._share_cuda_()
    return {"device": int(device), "handle": _b64(handle), "size_bytes": int(size_bytes), "offset_bytes": int(offset_bytes),
            "counter_handle": _b64(counter_handle), "counter_offset": int(counter_offset),
            "event_handle": _b64(event_handle) if event_handle else None, "event_sync_required": bool(event_sync_required)}


def _open_storage(shared: dict) -> torch.UntypedStorage:
    torch.cuda.init()
    return torch.UntypedStorage._new_shared_cuda(
        shared["device"], base64.b64decode(shared["handle"]), shared["size_bytes"], shared["offset_bytes"],
        base64.b64decode(shared["counter_handle"]), shared["counter_offset"],
        base64.b64decode(shared["event_handle"]) if shared["event_handle"] else None, shared["event_sync_required"])


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
