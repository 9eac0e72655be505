#!/usr/bin/env bash
# The 8B single-GPU matrix on one H200 (issue 27 item 3; docs/gpu.md, "8B on one H200: what fits"), one command:
#
#   OUT=$OUT bash benchmarks/gpu_8b.sh                                  # llama, the default scenarios, about 8 minutes
#   FAMILY=qwen3 OUT=$OUT bash benchmarks/gpu_8b.sh                     # the Qwen3-8B shapes
#   SCENARIOS="packed_vs_unpacked mask_alignment" LIMIT=300 OUT=$OUT bash benchmarks/gpu_8b.sh
#   CHECKPOINT_BENCH=0 LIMIT=480 OUT=$OUT bash benchmarks/gpu_8b.sh  # step 2 left out (measured 2026-12-02): the run writes the entry
#
# 1. installs packcheck from this tree (no network: --no-deps, as docs/gpu.md);
# 2. benchmarks/checkpoint_8b.py: the portable weights drawn on the GPU equal the CPU's bit for bit, the time to draw
#    them, to build the cache entry (bfloat16, 16 GB) and to hash it (sha256 rate);
# 3. `packcheck run --engine reference --model 8b --device cuda --dtype bfloat16` on the single-GPU scenarios, one run
#    (the checkpoint is written, hashed and copied once), stopped by SIGINT after LIMIT seconds with its verdicts kept;
# 4. a summary (benchmarks/gpu_8b_summary.py): every verdict with its wall time and worst margin, each arm's time and
#    peak GPU memory as the reference printed them, the peaks of GPU memory (nvidia-smi), host memory and disk.
#
# What lands in $OUT (a device call brings back few files): install.log, checkpoint.json, checkpoint.log, run.log,
# results.json and verdicts.jsonl of the run, arms.txt (the reference's lines from the launches' logs), run-logs.tgz
# (every launch log), gpu_memory.csv, host.csv, summary.md. The run itself writes under RUN (default /tmp/gpu8b-run-F,
# removed at the end). The cache keeps each family's entry: llama's (16.1 GB) and qwen3's (16.4 GB) with a launch's
# copy are 49 GB of a 64 GiB disk, so both families fit one machine, one after the other. Scenarios left out by default, and why (docs/gpu.md): gradient_oracle
# and oracle_agreement (their float64 CPU oracle needs 193 GB at 8B: unsupported there), rl_loss_aggregation (holds
# about 17 GPU arms' results, 16 GB each, at once: more than the host), golden_regression (goldens are tiny only), and
# the scenarios whose only GPU arm is their single-process one (cp_vs_nocp, dp_cp_reduction, linear_attention_reset,
# vlm_collective_symmetry: add them with SCENARIOS when time allows).
set -u
OUT=${OUT:?set OUT to the output directory}
FAMILY=${FAMILY:-llama}
LIMIT=${LIMIT:-330}
SCENARIOS=${SCENARIOS:-"packed_vs_unpacked document_isolation mask_alignment optimizer_step microbatch_invariance token_conservation rl_step0_ratio"}
RUN=${RUN:-/tmp/gpu8b-run-$FAMILY}
export PACKCHECK_CACHE_DIR=${PACKCHECK_CACHE_DIR:-/tmp/pccache}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$(dirname "$RUN")"
rm -rf "$RUN"
started=$(date +%s)
say() { echo "[gpu_8b $(( $(date +%s) - started ))s] $*"; }

python3 -m pip install --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || say "install failed: see install.log"

nvidia-smi --query-gpu=timestamp,memory.used,memory.total --format=csv,noheader,nounits -lms 500 > "$OUT/gpu_memory.csv" 2>/dev/null &
smi=$!
( echo "unix_s,disk_used_bytes,host_used_bytes,host_available_bytes"
  while true; do
    echo "$(date +%s),$(df -B1 --output=used "$(dirname "$RUN")" | tail -1 | tr -d ' '),$(free -b | awk '/Mem:/ {print $3 "," $7}')"
    sleep 1
  done ) > "$OUT/host.csv" &
sampler=$!
trap 'kill $smi $sampler 2>/dev/null' EXIT

if [ "${CHECKPOINT_BENCH:-1}" != 0 ]; then
  say "checkpoint: $FAMILY 8b into $PACKCHECK_CACHE_DIR"
  timeout 150 python3 benchmarks/checkpoint_8b.py --family "$FAMILY" --out "$OUT/checkpoint.json" > "$OUT/checkpoint.log" 2>&1
  say "checkpoint: exit $? ($(tail -c 400 "$OUT/checkpoint.log" | tr '\n' ' '))"
fi

say "run: $SCENARIOS (limit ${LIMIT}s)"
timeout -s INT -k 30 "$LIMIT" python3 -m packcheck.harness.cli.main run --engine reference --family "$FAMILY" --model 8b \
  --device cuda --dtype bfloat16 --scenario $SCENARIOS --save-arms none --no-report --timeout 300 --out "$RUN" \
  > "$OUT/run.log" 2>&1
code=$?
say "run: exit $code"
tail -5 "$OUT/run.log"

kill $smi $sampler 2>/dev/null
cp "$RUN/results.json" "$RUN/verdicts.jsonl" "$OUT/" 2>/dev/null
grep -rh "reference: " "$RUN/launches" --include='*.log' > "$OUT/arms.txt" 2>/dev/null
# the logs and small reports only: an interrupted launch may still hold its 16 GB checkpoint copy
(cd "$RUN" && find launches -type f -size -5M \( -name '*.log' -o -name '*.txt' -o -name '*.json' \) -print0 \
  | tar czf "$OUT/run-logs.tgz" --null -T -) 2>/dev/null
rm -rf "$RUN"  # an interrupted launch's copy (16 GB) would crowd the next family's run on a 64 GiB disk
python3 benchmarks/gpu_8b_summary.py "$OUT" | tee "$OUT/summary.md"
# a device call brings back at most 8 files: all but the summary and the run's results in one archive
(cd "$OUT" && tar czf files.tgz --exclude=files.tgz --exclude=summary.md --exclude=results.json . \
  && find . -maxdepth 1 -type f ! -name files.tgz ! -name summary.md ! -name results.json -delete)
say "done"
