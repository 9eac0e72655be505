"""hf_trainer.float64: the Trainer on a float64 model.

The model runs in float64, but `ForCausalLMLoss` "upcasts" the logits with `.float()`, which for a
float64 model is a downcast: the loss and every gradient carry float32 rounding, so float64
equivalences hold only to float32 precision.
"""

from __future__ import annotations

from dataclasses import replace

from impls.adapters.hf_trainer.engine import HfTrainerEngine


class Float64Engine(HfTrainerEngine):
    name = "hf_trainer.float64"
    capabilities = replace(HfTrainerEngine.capabilities, dtypes=frozenset({"float64"}))
    known_findings = ()
