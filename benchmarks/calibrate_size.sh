#!/usr/bin/env bash
# The reference's noise floor at a realistic size preset on one GPU (SIZE_NOISE_FLOORS in
# harness/compare/tolerances.py; docs/gpu.md, "Noise floors by size"): `packcheck calibrate --model MODEL` in
# three processes side by side, each over the same seeds but its own scenarios (the RL aggregation verdict, with
# 17 GPU arms a seed, alone; the other RL and optimizer verdicts; the SFT verdicts), each stopped after LIMIT
# seconds with the seeds it finished kept (one results.json per seed under OUT/<group>/seed-N). The checkpoint
# cache is removed at the end (a 0.6b seed's entry is ~3 GB; the disk is 64 GiB).
#
#   MODEL=0.6b FAMILY=qwen3 SEEDS=1-20 LIMIT=400 OUT=/tmp/out bash benchmarks/calibrate_size.sh
set -u
MODEL=${MODEL:-0.6b}
FAMILY=${FAMILY:-qwen3}
DTYPE=${DTYPE:-bfloat16}
SEEDS=${SEEDS:-1-20}
LIMIT=${LIMIT:-400}
OUT=${OUT:?set OUT to the output directory}
export PACKCHECK_CACHE_DIR=${PACKCHECK_CACHE_DIR:-/tmp/pccache}
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
declare -A GROUPS_OF=(
  [rl-agg]="rl_loss_aggregation"
  [rl-opt]="rl_step0_ratio optimizer_step"
  [sft]="packed_vs_unpacked document_isolation mask_alignment microbatch_invariance token_conservation"
)
for group in "${!GROUPS_OF[@]}"; do
  ( timeout -s INT "$LIMIT" python3 -m packcheck.harness.cli.main calibrate --engine reference --family "$FAMILY" \
      --model "$MODEL" --device cuda --dtype "$DTYPE" --seeds "$SEEDS" --scenario ${GROUPS_OF[$group]} --timeout 120 \
      --out "$OUT/$group" > "$OUT/$group.log" 2>&1
    echo "$group: exit $? at $(date +%T), $(ls "$OUT/$group"/seed-*/results.json 2>/dev/null | wc -l) seeds" ) &
done
wait
rm -rf "$PACKCHECK_CACHE_DIR"
