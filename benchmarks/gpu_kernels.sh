#!/usr/bin/env bash
# Issue 44 on one GPU machine, in one device call, after the kernels' wheels are installed (docs/gpu.md, "Carrying
# flash-attn-4"): the reference's flash backend at the tiny size (head_dim 16: refused with K1 where flash-attn-4
# 4.0.0b36 runs on SM90) and at 0.6b (head_dim 128: runs), `packcheck kernels` on flash-attn-4 over every head dim
# (three processes: its JIT compiles per head dim on the CPU), the other kernels, and K's ratio measurement on the
# correct CUDA kernels. The steps run side by side, each with its own time limit; one cut short leaves its results.jsonl.
#
#   OUT=/tmp/out bash benchmarks/gpu_kernels.sh
set -u
OUT=${OUT:?set OUT to the output directory}
LIMIT=${LIMIT:-420}
export PACKCHECK_CACHE_DIR=${PACKCHECK_CACHE_DIR:-/tmp/pccache}
PC="python3 -m packcheck.harness.cli.main"
RUNS=/tmp/gpu-kernels; mkdir -p "$RUNS"
step() {  # NAME COMMAND...: the command's log in $OUT/NAME.log, its run directory in $RUNS/NAME
  local name=$1; shift
  ( ( time timeout "$LIMIT" "$@" --out "$RUNS/$name" ) > "$OUT/$name.log" 2>&1
    cp "$RUNS/$name/results.json" "$OUT/$name.results.json" 2>/dev/null || cp "$RUNS/$name/results.jsonl" "$OUT/$name.results.jsonl" 2>/dev/null ) &
}
FA4="$PC kernels --kernel flash-attn-4 --device cuda --gqa 2 --examples 1"
step fa4_a $FA4 --head-dims 8-88
step fa4_b $FA4 --head-dims 96-168
step fa4_c $FA4 --head-dims 176-256
step others $PC kernels --kernel torch-varlen flex sdpa fla-chunk fla-fused fla-conv causal-conv1d --device cuda \
  --head-dims 64,80,128 --gqa 1,4 --examples 1
step flash_tiny $PC run --engine reference --attention flash --family llama --device cuda --dtype bfloat16
step flash_06b $PC run --engine reference --attention flash --family llama --model 0.6b --device cuda --dtype bfloat16 \
  --scenario packed_vs_unpacked gradient_oracle
( time timeout "$LIMIT" python3 benchmarks/kernel_k.py --cases 20 --device cuda --kernels sdpa torch-varlen flex ) > "$OUT/kernel_k.log" 2>&1 &
wait
