"""Model families and their seeded Hugging Face checkpoints."""

from packcheck.harness.contract import ModelSpec
from packcheck.harness.lazy import lazy_names
from packcheck.harness.models.families import FAMILIES, Family, get_family

DEFAULT_SEED = 1234
# checkpoint.py imports torch (2.4 s): its names are imported when first asked for, so that reading the families
# (`packcheck list families`) does not wait for it
__getattr__ = lazy_names(__name__, "checkpoint", ("checkpoint_for", "checkpoint_problem", "copy_checkpoint", "parameter_shapes",
                                                  "pin_cache", "repair_checkpoint", "unpin_cache", "write_checkpoint"))


def model_spec(family_name: str, seed: int = DEFAULT_SEED, **config_overrides) -> ModelSpec:
    """A ModelSpec for the family's tiny config, with its checkpoint written to the cache."""
    from packcheck.harness.models.checkpoint import checkpoint_for

    family = get_family(family_name)
    config = family.config(**config_overrides)
    return ModelSpec(family=family_name, config=config, seed=seed, checkpoint=checkpoint_for(family_name, config, seed),
                     frozen=family.frozen)


__all__ = ["DEFAULT_SEED", "FAMILIES", "Family", "checkpoint_for", "checkpoint_problem", "copy_checkpoint", "get_family", "model_spec", "parameter_shapes", "pin_cache",
           "repair_checkpoint", "unpin_cache", "write_checkpoint"]
