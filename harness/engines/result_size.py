"""The most bytes a valid result of a case can hold, and a result file checked against it before it is read.

    result_bytes_limit(case)              every gradient and parameter of the checkpoint and every token's log-prob and
                                          weight, in float64, plus the safetensors header: no valid result is larger
    oversized_result(path, case) -> str   None, or a sentence: rank 0's result.safetensors is larger than that limit

An engine's process writes result.safetensors, and an engine that returns (or writes) a 1 GiB tensor under a real
result name made the harness load 3.5 GB and keep 3.1 GB in --out for one invalid result. The harness looks at the
file's size and header before it loads or copies anything (harness/launch/collect.py); rank 0 drops what the case has no
room for before it saves an invalid result (caps.tensors_worth_keeping).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

from packcheck.harness.contract import Case
from packcheck.harness.engines.validate import checkpoint_shapes

FLOAT64 = 8
HEADER_BYTES = 64 * 1024 + 512  # the safetensors header: its metadata, then a line per tensor (512 bytes allowed each)


def result_bytes_limit(case: Case) -> int:
    shapes = checkpoint_shapes(case.model.checkpoint)
    parameters = sum(math.prod(shape) for shape in shapes.values())
    tokens = sum(len(sample.input_ids) for sample in case.samples)
    router = int(case.model.config.get("num_hidden_layers", 0)) * int(case.model.config.get("num_experts", 0) or 0)
    tensors = 2 * len(shapes) + 2 * len(case.samples) + 1
    return FLOAT64 * (2 * parameters + 2 * tokens + router) + HEADER_BYTES + 512 * tensors


def oversized_result(path: Path, case: Case) -> str | None:
    """None when the safetensors file `path` can be a valid result of `case`, else what is wrong with it: larger than
    result_bytes_limit, or a header that is not a safetensors one. Only its first bytes are read."""
    limit = result_bytes_limit(case)
    try:
        size = path.stat().st_size
        with open(path, "rb") as file:
            (length,) = struct.unpack("<Q", file.read(8))
            header = json.loads(file.read(min(length, limit))) if length <= limit else None
    except (OSError, struct.error, ValueError, RecursionError) as err:
        return f"rank 0's {path.name} cannot be read as safetensors ({err}): not loaded"
    if size > limit or header is None:
        return (f"rank 0's {path.name} holds {size:,} bytes, more than any valid result of this case can ({limit:,} bytes: every "
                "gradient and parameter of the checkpoint and every token's log-prob in float64): not loaded")
    return None
