#!/usr/bin/env bash
# On one CUDA machine without network, from the repository root: the GPU test run and the timings, each step chosen by
# STEPS (default: all, in this order):
#   times   reproduce --fix N --device cuda per fix, process start included, and where the start goes (tools/reproduce_times.py)
#   sweep   fix 2's full greedy sweep, one process per setting on the machine's CPU cores (tools/fix2_arms.py)
#   test    make gpu-test GPU_PY=python3 (every notebook with the gpu and slow flags, then pytest -m "gpu or slow")
#   bench   the engine benchmark (tools/engine_bench.py), then fix 2's arms timed at k = 3 (tools/fix2_gpu.py)
# Needs python3 with torch and triton; nbdev, execnb, ipython and fastcore come from the wheels in ${WHL:-.whl}
# (tools/gpu_wheels.txt). Writes into $OUT (default /tmp/out): run.log and results.tgz (the JSON runs and logs).
set -uo pipefail
OUT=${OUT:-/tmp/out}; WHL=${WHL:-.whl}; STEPS=${STEPS:-times sweep test bench}; SITE=/tmp/vllm-pd-spec-gpu-site
R=$OUT/results; mkdir -p "$R"
exec > >(tee -a "$OUT/run.log") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE $WHL/*.whl || exit 2
export PYTHONPATH=$SITE:$PWD PYTHONUNBUFFERED=1 TQDM_DISABLE=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import os, torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cpus', os.cpu_count())"
rc=0
step() {  # step LOG COMMAND...: run it, its output (profiler noise dropped) to the screen and LOG, and say how it ended
  local log=$1; shift; local t=$(date +%s%N)
  "$@" 2>&1 | grep --line-buffered -v USDT | tee -a "$log"; local s=${PIPESTATUS[0]}
  echo "== $*: exit $s in $(( ($(date +%s%N) - t) / 1000000 )) ms" | tee -a "$log"; [ $s = 0 ] || rc=1
}
SKIP_RE=${SKIP_RE:-^(_|02b_)}
for s in $STEPS; do case $s in
  times) step $R/times.log python3 tools/reproduce_times.py --device cuda ${WHOLE:+--whole} --out $R/reproduce_times_h200.json ;;
  sweep) step $R/sweep.log python3 tools/fix2_arms.py --models text-attn text-hybrid --processes ${SWEEP_PROCS:-18} --out $R/fix2_sweep_h200.json ;;
  test)  if command -v make >/dev/null; then
           step $R/gpu_test.log make --no-print-directory gpu-test GPU_PY=python3 WHL=$WHL GPU_SITE=$SITE \
             GPU_TEST_ARGS="--n-workers ${NB_WORKERS:-8} --timing --skip-file-re '$SKIP_RE'"
         else
           step $R/gpu_test.log python3 $SITE/bin/nbdev-test --flags "gpu slow" --n-workers ${NB_WORKERS:-8} --timing --skip-file-re "$SKIP_RE"
           step $R/gpu_test.log python3 -m pytest tests/ -q -m "gpu or slow" -p no:cacheprovider
         fi ;;
  bench) step $R/bench.log timeout ${BENCH_S:-300} python3 tools/engine_bench.py --budget-s ${BUDGET_S:-240} ${BENCH_ARGS:-} --out $R/engine_bench.json
         [ -z "${FIX2_S:-}" ] || step $R/bench.log timeout $FIX2_S python3 tools/fix2_gpu.py --ks 3 --out $R/fix2_gpu_graphs.json ;;
esac; done
tar czf "$OUT/results.tgz" -C "$R" .
exit $rc
