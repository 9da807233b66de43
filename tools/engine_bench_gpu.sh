#!/usr/bin/env bash
# On one GPU, from the repository root: the float64 path check and the engine benchmark (tools/engine_bench.py), then
# fix 2's arms re-timed at k = 3 (tools/fix2_gpu.py). Needs python3 with torch and triton; fastcore, tokenizers and
# safetensors come from wheels in ${WHL:-.whl} where python3 lacks them (fetched with
#   python3 -m pip download --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 --python-version 3.10 \
#     -d .whl fastcore==2.2.41 tokenizers==0.23.3 safetensors==0.8.0).
# Writes nbs/runs/engine_bench.json and nbs/runs/fix2_gpu_batched.json, copied with the logs into $OUT (default /tmp/out).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; WHL=${WHL:-.whl}
SITE=
if ! python3 -c "import fastcore, tokenizers, safetensors" 2>/dev/null; then
  SITE=/tmp/engine_bench_site; python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE $WHL/*.whl || exit 2
fi
export PYTHONPATH=${SITE:+$SITE:}$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
timeout ${BENCH_S:-360} python3 tools/engine_bench.py --budget-s ${BUDGET_S:-300} 2>&1 | grep -v USDT | tee "$OUT/engine_bench.log"
cp nbs/runs/engine_bench.json "$OUT/" 2>/dev/null
timeout ${FIX2_S:-150} python3 tools/fix2_gpu.py --ks 3 --out nbs/runs/fix2_gpu_batched.json 2>&1 | grep -v USDT | tee "$OUT/fix2_gpu_batched.log"
cp nbs/runs/fix2_gpu_batched.json "$OUT/" 2>/dev/null
exit 0
