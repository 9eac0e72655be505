#!/usr/bin/env bash
# Several `packcheck run`s on one GPU machine inside one device call, one after the other, each with its share of the
# call's time: PLAN is a file of lines `NAME ENGINES... -- FLAGS...` (the flags of `packcheck run`; --device cuda and
# --save-arms none are added). Each run's results.json, console log and one summary line per verdict (status, margin,
# seconds) land in $OUT (the logs and results.json files as runs.tgz: a device call brings back few files); runs not reached by DEADLINE (seconds since start) are listed as such. Used for docs/gpu.md.
#
#   OUT=/tmp/out DEADLINE=540 bash benchmarks/gpu_matrix.sh benchmarks/plans/06b-rest.txt
set -u
PLAN=${1:?usage: gpu_matrix.sh PLAN}
OUT=${OUT:?set OUT to the output directory}
KEEP=/tmp/gpu-matrix; mkdir -p "$KEEP" /tmp/runs  # each run's log and results.json, tarred into $OUT at the end
DEADLINE=${DEADLINE:-540}
export PACKCHECK_CACHE_DIR=${PACKCHECK_CACHE_DIR:-/tmp/pccache}
start=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$OUT/device.txt" 2>&1
python3 -c "import torch; print('torch', torch.__version__)" >> "$OUT/device.txt"
while read -r name rest; do
  [ -z "$name" ] && continue
  case $name in \#*) continue ;; esac
  left=$(( DEADLINE - ($(date +%s) - start) ))
  if [ "$left" -lt 20 ]; then echo "$name: not reached (deadline)" >> "$OUT/summary.txt"; continue; fi
  engines=${rest%% -- *}; flags=${rest#* -- }
  t0=$(date +%s)
  # SIGINT: packcheck writes results.json and its report for the verdicts it finished
  timeout -s INT "$left" python3 -m packcheck.harness.cli.main run --engine $engines --device cuda --save-arms none \
      --no-report $flags --out "/tmp/runs/$name" > "$KEEP/$name.log" 2>&1
  code=$?
  cp "/tmp/runs/$name/results.json" "$KEEP/$name.results.json" 2>/dev/null
  python3 - "$name" "$code" "$(( $(date +%s) - t0 ))" "/tmp/runs/$name/results.json" >> "$OUT/summary.txt" <<'EOF'
import json, sys
name, code, seconds, path = sys.argv[1:]
try:
    data = json.load(open(path))
except OSError:
    print(f"{name}: exit {code} after {seconds} s, no results.json"); sys.exit()
res = data.get("resources", {})
print(f"{name}: exit {code} after {seconds} s; peak disk {res.get('peak_disk_bytes', 0) / 1e9:.1f} GB, "
      f"harness RSS {res.get('harness_peak_rss_bytes', 0) / 1e9:.1f} GB, engine RSS {(res.get('engine_peak_rss_bytes') or 0) / 1e9:.1f} GB")
for v in data["verdicts"]:
    print(f"  {v['engine']} {v['family']} {v['scenario']}: {v['status']} margin {v.get('max_margin')} "
          f"{v.get('seconds', 0):.1f} s {v.get('diagnosis', '')[:160]!r}")
EOF
  rm -rf "/tmp/runs/$name"
done < "$PLAN"
tar czf "$OUT/runs.tgz" -C "$KEEP" .
cat "$OUT/summary.txt"
