"""What any transformers model loaded in float64 computes in float32 (RMSNorm, RoPE), cited by every adapter whose
known finding it causes (ringmaster_cp's R2, hf_tp's H9): one reading of the upstream code, one place."""

EVIDENCE = ("transformers 5.24.0 models/llama/modeling_llama.py (and qwen3): LlamaRMSNorm.forward casts to float32 (from "
            "T5LayerNorm, whose comment says the variance is computed in fp32), LlamaRotaryEmbedding.forward computes the "
            "angles in float32")
UPSTREAM = "none found (intended for half precision; nothing upstream covers float64 models)"
