#!/usr/bin/env bash
# The reference's noise floor on one GPU, every family, both lower precisions: `packcheck calibrate` per family and
# dtype in parallel processes (the runs are CPU-bound at the tiny size), each stopped after LIMIT seconds with the
# seeds it finished kept (one results.json per seed). Used for docs/gpu.md, "Calibrated tolerances".
#
#   SEEDS_DENSE=100-149 SEEDS_OTHER=100-129 LIMIT=450 OUT=/tmp/out bash benchmarks/calibrate_gpu.sh
#   FAMILIES="qwen3_5 qwen2_5_vl" SEEDS_OTHER=150-199 LIMIT=400 OUT=/tmp/out bash benchmarks/calibrate_gpu.sh
#
# gradient_oracle is left out: it is judged against the float64 oracle with golden_regression's own noise floor,
# not with the table calibrated here, and its float64 CPU arms are most of a seed's time. Every other scenario a
# single GPU hosts runs (cp_vs_nocp, dp_cp_reduction and vlm_collective_symmetry have no single-GPU arm to measure).
set -u
SEEDS_DENSE=${SEEDS_DENSE:-100-149}
SEEDS_OTHER=${SEEDS_OTHER:-100-129}
LIMIT=${LIMIT:-450}
OUT=${OUT:?set OUT to the output directory}
DTYPES=${DTYPES:-float32 bfloat16}
FAMILIES=${FAMILIES:-llama qwen3 qwen3_moe qwen3_5 qwen2_5_vl}
SCENARIOS="packed_vs_unpacked document_isolation microbatch_invariance mask_alignment token_conservation rl_step0_ratio
rl_loss_aggregation optimizer_step linear_attention_reset"
for dtype in $DTYPES; do
  for family in $FAMILIES; do
    case $family in llama|qwen3) seeds=$SEEDS_DENSE ;; *) seeds=$SEEDS_OTHER ;; esac
    ( timeout "$LIMIT" python3 -m packcheck.harness.cli.main calibrate --engine reference --family "$family" --device cuda \
        --dtype "$dtype" --seeds "$seeds" --scenario $SCENARIOS --timeout 60 --out "$OUT/$dtype/$family" \
        > "$OUT/$dtype-$family.log" 2>&1
      echo "$dtype $family: exit $? at $(date +%T), $(ls -d "$OUT/$dtype/$family"/seed-*/results.json 2>/dev/null | wc -l) seeds" ) &
  done
done
wait
