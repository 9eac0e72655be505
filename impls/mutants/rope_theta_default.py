"""mutant.rope-theta-default: RoPE's base is a hard-coded default, not the checkpoint's.

The engine builds its rotary embedding with base 500000 (Llama 3's) instead of reading
`rope_parameters.rope_theta` from the checkpoint's config.json (transformers 5 nests it there;
code that reads the top-level key only falls back to its own default). Every arm runs the same wrong
model math, so every arm agrees with every other: only the stored golden sees it, and the diagnosis
must say the baseline itself is broken (docs/diagnoses.md).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from packcheck.harness.contract import Case, StepResult
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.mesh import Mesh

DEFAULT_ROPE_THETA = 500000.0


def with_rope_theta(checkpoint: str, theta: float, directory: Path) -> str:
    """A copy of the checkpoint whose config says `theta`: the model the buggy engine builds."""
    config = json.loads((Path(checkpoint) / "config.json").read_text())
    decoder = config.get("text_config", config)  # a vision-language model's decoder config is nested
    decoder.setdefault("rope_parameters", {})["rope_theta"] = theta
    (directory / "config.json").write_text(json.dumps(config))
    shutil.copy(Path(checkpoint) / "model.safetensors", directory / "model.safetensors")
    return str(directory)


class RopeThetaDefault(ReferenceEngine):
    name = "mutant.rope-theta-default"
    bug = "rope-theta-default"

    def train(self, case: Case, mesh: Mesh) -> StepResult | None:
        with tempfile.TemporaryDirectory(prefix="rope-theta-default-") as directory:
            checkpoint = with_rope_theta(case.model.checkpoint, DEFAULT_ROPE_THETA, Path(directory))  # the bug
            return super().train(case.with_(model=case.model.with_checkpoint(checkpoint)), mesh)
