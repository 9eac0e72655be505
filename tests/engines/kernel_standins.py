"""Stand-in kernels for tests/test_kernels.py: torch's SDPA on each document, made wrong in one known way each, so the
tests can tell whether `packcheck kernels` finds the wrong configurations, their range and their smallest case."""

from __future__ import annotations

import dataclasses

import torch

from packcheck.harness.engines.findings import FindingKind
from packcheck.harness.engines.kernel_findings import KernelFinding
from packcheck.harness.kernels.attention_kernels import sdpa_per_document
from packcheck.harness.kernels.registry import KERNELS
from packcheck.harness.kernels.shapes import HEAD_DIMS

SDPA = KERNELS["sdpa"]


def standin(name: str, call, version: str | None = None):
    return dataclasses.replace(SDPA, name=name, distribution="packcheck-standin", load=lambda device: call,
                               version=lambda: version, description=f"stand-in: {name}")


def _dq_wrong_off_32(x, packing):
    """Right forward; dq 1.5 times too large where head_dim % 32 != 0 (the shape of K1)."""
    q = x["q"]
    if q.shape[-1] % 32:
        q = q + 0.5 * (q - q.detach())  # the same value, a gradient of 1.5
    return sdpa_per_document("cpu")(x | {"q": q}, packing)


def _wrong_at_one_token(x, packing):
    """A 1-token document's output halved; every other document right."""
    out = sdpa_per_document("cpu")(x, packing)["out"]
    alone = torch.tensor([end - start == 1 for start, end in packing.spans for _ in range(end - start)])
    return {"out": torch.where(alone[:, None, None], out * 0.5, out)}


def _dq_at_one_token(size: float):
    """Right, except that a 1-token document's dq (0: its softmax is 1 whatever the score) comes back as `size` times
    the gradient's scale: 1e-7 is the float32 rounding a GPU kernel's P x (dP - D) leaves there; 0.1 is a real error."""
    def call(x, packing):
        q = x["q"].clone()
        alone = torch.tensor([end - start == 1 for start, end in packing.spans for _ in range(end - start)])
        q.register_hook(lambda g: (g + size * alone[:, None, None] * x["q"].detach().abs().mean()).to(g.dtype))
        return sdpa_per_document("cpu")(x | {"q": q}, packing)
    return call


def _raises(x, packing):
    raise RuntimeError("CUDA error: an illegal memory access <script>alert(1)</script>")


def _nan(x, packing):
    out = sdpa_per_document("cpu")(x, packing)["out"]
    return {"out": out * torch.nan}


WRONG_OFF_32 = standin("wrong-off-32", _dq_wrong_off_32)
WRONG_AT_ONE_TOKEN = standin("wrong-at-one-token", _wrong_at_one_token)
ROUNDING_AT_ONE_TOKEN = standin("rounding-at-one-token", _dq_at_one_token(1e-7))
WRONG_DQ_AT_ONE_TOKEN = standin("wrong-dq-at-one-token", _dq_at_one_token(0.1))
RAISES = standin("raises", _raises)
RETURNS_NAN = standin("returns-nan", _nan)
PINNED = standin("pinned", _dq_wrong_off_32, version="1.0")  # inside the pin below
FIXED_IN_PIN = standin("fixed-in-pin", sdpa_per_document("cpu"), version="1.0")  # right, but still inside the pin
PINNED_NEWER = standin("pinned-newer", _dq_wrong_off_32, version="1.1")  # wrong, outside the pin

FINDING = KernelFinding(
    id="K99", kind=FindingKind.DEFECT, kernel="pinned", distribution="packcheck-standin", versions="==1.0", capabilities=(),
    head_dims=tuple(d for d in HEAD_DIMS if d % 32), tested="every multiple of 8 from 8 to 256", wrong="dq at every head ratio", measured="dq rel_l2 0.5 (stand-in)", evidence="tests/engines/kernel_standins.py",
    upstream="none found (a stand-in)", way_out="the sdpa kernel")
