set -x
cd "$(dirname "$0")"
date -u
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
export PYTHONUNBUFFERED=1 PACKCHECK_CACHE_DIR=/tmp/pccache
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_device_result.py 2>&1 | tail -3
timeout -s INT ${LIMIT:-450} packcheck run --engine reference --device cuda --dtype bfloat16 --model 0.6b --family qwen3 --save-arms none --out /tmp/o06 --no-report --scenario rl_loss_aggregation rl_step0_ratio linear_attention_reset vlm_collective_symmetry optimizer_step gradient_oracle 2>&1 | tail -14
cp /tmp/o06/results.json $OUT/ 2>/dev/null; nvidia-smi --query-gpu=memory.used --format=csv; du -sh /tmp/o06; date -u
