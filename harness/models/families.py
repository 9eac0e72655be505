"""The model families packcheck knows: a tiny Hugging Face config for each, built from code only.

A family is a name users type (`llama`, `qwen3`), the transformers config/model classes that
define its parameter names, and a tiny config small enough for float64 on two CPU cores while
keeping what matters for packing: several heads, grouped-query attention, RoPE, qk-norm.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from packcheck.harness.registry import Registry

TINY = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    use_cache=False,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Family:
    name: str
    description: str
    config_class: str
    model_class: str
    tiny_config: dict = field(hash=False)
    frozen: tuple[str, ...] = ()  # parameter name prefixes that do not train by default (ModelSpec.frozen)

    def config(self, **overrides) -> dict:
        return {**self.tiny_config, **overrides}


FAMILIES: Registry[Family] = Registry("model family")


def register_family(family: Family) -> Family:
    return FAMILIES.register(family.name, family)


def get_family(name: str) -> Family:
    return FAMILIES[name]


register_family(Family(
    name="llama",
    description="Llama-style dense decoder: RoPE, GQA, SwiGLU, RMSNorm",
    config_class="LlamaConfig",
    model_class="LlamaForCausalLM",
    tiny_config={"model_type": "llama", **TINY},
))
register_family(Family(
    name="qwen3",
    description="Qwen3 dense decoder: Llama layout plus per-head RMSNorm on q and k (qk-norm)",
    config_class="Qwen3Config",
    model_class="Qwen3ForCausalLM",
    tiny_config={"model_type": "qwen3", "head_dim": 16, **TINY},
))
register_family(Family(
    name="qwen3_5",
    description="Qwen3.5 hybrid: GatedDeltaNet linear-attention layers (short conv + gated delta rule) "
                "interleaved with gated full attention (partial RoPE, zero-centred RMSNorm)",
    config_class="Qwen3_5TextConfig",
    model_class="Qwen3_5ForCausalLM",
    # three linear-attention layers and one full-attention layer, as the real 3:1 interleave;
    # grouped value heads (2 key heads, 4 value heads) and the real conv kernel of 4
    tiny_config={
        "model_type": "qwen3_5_text", "head_dim": 16, **TINY, "num_hidden_layers": 4,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    },
))
register_family(Family(
    name="qwen3_moe",
    description="Qwen3-MoE decoder: Qwen3 attention, top-2 of 4 experts, load-balancing aux loss over the global batch",
    config_class="Qwen3MoeConfig",
    model_class="Qwen3MoeForCausalLM",
    # norm_topk_prob as the released Qwen3-MoE checkpoints; the aux loss is on (output_router_logits) with a
    # coefficient 100x Qwen3-MoE's 1e-3: it moves the router gradients by 6e-2..9e-2 and those upstream (attention,
    # embeddings) by ~1e-2 relative (measured), so an aux loss off by a few percent shows at 1e6+ times the float64
    # tolerance in every router gradient, where 1e-3 would leave it two orders closer to the noise
    tiny_config={
        "model_type": "qwen3_moe", "head_dim": 16, **TINY, "num_experts": 4, "num_experts_per_tok": 2,
        "moe_intermediate_size": 32, "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "output_router_logits": True, "router_aux_loss_coef": 0.1,
    },
))

# Qwen2.5-VL: a 2-block vision tower (2x2-pixel patches, 2 frames per temporal patch, 2x2 patch
# merge into the text width) feeding the placeholder tokens of a Qwen2 decoder with q/k/v biases
# and 3D MRoPE (the 8 rotary frequencies of a 16-dim head split 2/3/3 over time/height/width).
# Every vision block attends over the whole image (fullatt_block_indexes lists both), so Qwen2.5-VL's
# window permutation only reorders tokens that attend to one another anyway.
VLM_SPECIAL_TOKENS = dict(vision_start_token_id=124, vision_end_token_id=125, video_token_id=126, image_token_id=127)
register_family(Family(
    name="qwen2_5_vl",
    description="Qwen2.5-VL vision-language model: vision tower (frozen), placeholder merge, 3D MRoPE, Qwen2 decoder",
    config_class="Qwen2_5_VLConfig",
    model_class="Qwen2_5_VLForConditionalGeneration",
    tiny_config={
        "model_type": "qwen2_5_vl",
        "vocab_size": TINY["vocab_size"],
        "num_hidden_layers": TINY["num_hidden_layers"],  # mirrors text_config: the harness reads the attention layer count here
        "tie_word_embeddings": False,
        "use_cache": False,
        **VLM_SPECIAL_TOKENS,
        "text_config": {
            **TINY,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            "bos_token_id": None,
            "eos_token_id": None,
        },
        "vision_config": {
            "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "in_channels": 3, "patch_size": 2,
            "temporal_patch_size": 2, "spatial_merge_size": 2, "window_size": 8, "out_hidden_size": TINY["hidden_size"],
            "fullatt_block_indexes": [0, 1],
        },
    },
    frozen=("model.visual.",),
))
