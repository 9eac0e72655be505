"""A CPU platform for verl: the one piece of verl's plumbing this adapter has to supply.

verl 0.9.1 resolves its accelerator through a platform registry (`verl.plugin.platform`) and
ships CUDA, ROCm and NPU platforms only; on a machine without one it falls back to "nvidia" and
calls `torch.cuda.set_device`. This subclass of `PlatformBase` says "device cpu, backend gloo"
and nothing else: every method is the CPU meaning of the hook (no-ops for streams, profiling,
allocator settings, IPC), so no numerics of verl change. `install()` registers it under the name
"cpu" and makes it verl's current platform; call it before verl builds an engine.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from types import ModuleType

import torch

from verl.plugin.platform import PlatformRegistry, get_platform, set_platform
from verl.plugin.platform.platform_base import PlatformBase


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl on the host CPU: tensors on "cpu", collectives over gloo."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return torch.cpu

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return True

    def current_device(self) -> str:
        # verl passes this to `tensor.to(...)` and `torch.device(...)`, which read a bare int as a CUDA ordinal
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        pass  # one host, nothing to select

    def synchronize(self, device_index: int | None = None) -> None:
        pass  # CPU kernels are synchronous

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass  # the CUDA caching allocator's knobs have no CPU counterpart

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CPU_VISIBLE_DEVICES"  # read by verl's Ray placement only, which this adapter never starts

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self):
        return None


def install() -> PlatformBase:
    """Make the CPU platform verl's current one (idempotent); return it."""
    os.environ["VERL_PLATFORM"] = "cpu"  # verl's documented override, read if nothing has resolved a platform yet
    if not isinstance(get_platform(), PlatformCPU):
        set_platform(PlatformCPU())
    return get_platform()
