#!/usr/bin/env bash
# The reference's noise floor at a realistic size preset on one GPU (SIZE_NOISE_FLOORS in
# harness/compare/tolerances.py; docs/gpu.md, "Noise floors by size"): `packcheck calibrate --model MODEL` over
# SEEDS, one process (each rank's memory plan assumes the whole GPU: 2026-12-03, three of these side by side with
# four tiny calibrations ran out of GPU memory in 21 of 31 verdicts), stopped after LIMIT seconds with the seeds it
# finished kept (OUT/seed-N/results.json). The RL verdicts, which set the dloss_dlogprobs floor, come first. The
# checkpoint cache is removed at the end (a 0.6b seed's entry is ~3 GB; the disk is 64 GiB).
#
#   MODEL=0.6b FAMILY=qwen3 SEEDS=1-20 LIMIT=540 OUT=/tmp/out bash benchmarks/calibrate_size.sh
set -u
MODEL=${MODEL:-0.6b}
FAMILY=${FAMILY:-qwen3}
DTYPE=${DTYPE:-bfloat16}
SEEDS=${SEEDS:-1-20}
LIMIT=${LIMIT:-540}
OUT=${OUT:?set OUT to the output directory}
SCENARIOS=${SCENARIOS:-"rl_loss_aggregation rl_step0_ratio optimizer_step packed_vs_unpacked document_isolation mask_alignment microbatch_invariance token_conservation"}
export PACKCHECK_CACHE_DIR=${PACKCHECK_CACHE_DIR:-/tmp/pccache}
timeout -s INT "$LIMIT" python3 -m packcheck.harness.cli.main calibrate --engine reference --family "$FAMILY" \
    --model "$MODEL" --device cuda --dtype "$DTYPE" --seeds "$SEEDS" --scenario $SCENARIOS --timeout 300 \
    --out "$OUT" > "$OUT.log" 2>&1
echo "exit $? at $(date +%T), $(ls "$OUT"/seed-*/results.json 2>/dev/null | wc -l) seeds"
rm -rf "$PACKCHECK_CACHE_DIR"
