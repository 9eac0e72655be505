"""What prime-rl needs on a CPU machine that its real dependency cannot give, each replaced by the
smallest stand-in (documented in docs/adapters.md, "prime_rl"):

- flash-attention 2's `flash_attn_varlen_func` (CUDA only): the CPU kernel in varlen.py, set as
  `FlashAttention._funcs[2]` (which a model's attention layers read when they are built) and, only
  while `substitute_ulysses_attn` runs (its own `from flash_attn import flash_attn_varlen_func`), as
  a `flash_attn` module: left installed, transformers would take it for the real package.
- the three other families `substitute_ulysses_attn` patches too (AFMoE, Qwen3.5, Qwen3.5-MoE):
  their modules import torchtitan's MoE and triton kernels, so while the patch runs their
  attention classes are placeholders (those families are not run by this adapter).
- `ring_flash_attn` (CUDA only, imported by `prime_rl.utils.cp` at module level): its three names,
  each raising if called; ring CP is declared unsupported on CPU, so only the import is served.
- `wandb` (imported by `prime_rl.utils.utils`, which the loss imports for `import_object`): an empty
  module; nothing here logs.
- `prime_rl.trainer.models` and `.models.layers`: bare package objects over the checkout's folders,
  so that importing `models.llama` or `layers.attn` does not run their `__init__`s, which import every
  model family prime-rl ships (MoE kernels, triton, torchao).
Nothing in prime-rl's packing, loss or CP code is replaced.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import sys
import types
from pathlib import Path

from packcheck.impls.adapters.prime_rl import varlen


def _module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package="__path__" in attrs)  # transformers probes find_spec
    module.__dict__.update(attrs)
    module.__packcheck_stub__ = True
    return module


def _cuda_only(name: str):
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"ring_flash_attn.{name} is CUDA-only: ring context parallelism is not available on CPU")
    return refuse


ULYSSES_OTHER_FAMILIES = {  # module substitute_ulysses_attn imports -> the attention class it patches there
    "prime_rl.trainer.models.afmoe.modeling_afmoe": "AfmoeFlashAttention",
    "prime_rl.trainer.models.qwen3_5_moe.modeling_qwen3_5_moe": "Qwen3_5MoeGatedFlashAttention",
    "prime_rl.trainer.models.qwen3_5.modeling_qwen3_5": "Qwen3_5GatedFlashAttention",
}


@contextlib.contextmanager
def ulysses_imports():
    """Inside the block `import flash_attn` gives the CPU kernel and the other families' modules are placeholders
    (for substitute_ulysses_attn); after it, both are gone again."""
    if "flash_attn" in sys.modules:
        raise RuntimeError("a flash_attn package is already imported here: the CPU stand-in would not be the kernel used")
    added = {"flash_attn": _module("flash_attn", flash_attn_varlen_func=varlen.flash_attn_varlen_func)}
    for module, cls in ULYSSES_OTHER_FAMILIES.items():
        package = module.rpartition(".")[0]
        if module not in sys.modules:
            added.setdefault(package, _module(package, __path__=[]))
            added[module] = _module(module, **{cls: type(cls, (), {})})
    added = {name: m for name, m in added.items() if name not in sys.modules}
    sys.modules.update(added)
    try:
        yield
    finally:
        for name in added:
            del sys.modules[name]


def install(root: Path) -> None:
    if "ring_flash_attn" not in sys.modules:
        sys.modules["ring_flash_attn"] = _module("ring_flash_attn", **{
            name: _cuda_only(name)
            for name in ("update_ring_flash_attn_params", "substitute_hf_flash_attn", "llama3_flash_attn_varlen_func")})
    if "wandb" not in sys.modules:
        sys.modules["wandb"] = _module("wandb")
    for package, folder in (("prime_rl.trainer.models", "src/prime_rl/trainer/models"),
                            ("prime_rl.trainer.models.layers", "src/prime_rl/trainer/models/layers")):
        if package not in sys.modules:
            sys.modules[package] = _module(package, __path__=[str(root / folder)])
    from prime_rl.trainer.models.layers.attn import FlashAttention

    FlashAttention._funcs[2] = varlen.flash_attn_varlen_func
