"""The sizes of a model's config, checked before anything is built from it: a config.json of the user's (`--model DIR`)
or a replayed case's arm can say anything, and a negative `vocab_size` reached torch as "Trying to create tensor with
negative dimension" and an internal-error traceback. Standard library only.

    config_problem(config)   # None, or "vocab_size is -5, expected a positive whole number" (nested configs named by path)
"""

from __future__ import annotations

# the config fields packcheck's families size a tensor, a loop or a token id by (their tiny configs' integers); each must
# be a positive whole number wherever it appears, a vision or text sub-config included
SIZES = frozenset({
    "depth", "head_dim", "hidden_size", "in_channels", "intermediate_size", "linear_conv_kernel_dim", "linear_key_head_dim",
    "linear_num_key_heads", "linear_num_value_heads", "linear_value_head_dim", "max_position_embeddings", "moe_intermediate_size",
    "num_attention_heads", "num_experts", "num_experts_per_tok", "num_heads", "num_hidden_layers", "num_key_value_heads",
    "out_hidden_size", "patch_size", "spatial_merge_size", "temporal_patch_size", "vocab_size", "window_size", "decoder_sparse_step",
})
DEPTH = 4  # a config nests its sub-configs one level (text_config, vision_config); deeper is not a model's


def config_problem(config: object, at: str = "") -> str | None:
    """What is wrong with the sizes of `config`, naming the field by its path, or None."""
    if not isinstance(config, dict):
        return f"{at or 'the config'} is a {type(config).__name__}, expected an object"
    for key, value in config.items():
        name = f"{at}{key}"
        if isinstance(value, dict):
            if name.count(".") >= DEPTH:
                return f"{name} nests sub-configs deeper than a model's config does"
            if (problem := config_problem(value, f"{name}.")) is not None:
                return problem
        elif key in SIZES and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return f"{name} is {value!r:.40}, expected a positive whole number"
    return None
