#!/usr/bin/env bash
# On one CUDA machine without network, from the repository root: the GPU test run and the timings, each step chosen by
# STEPS (in the order given; default `times sweep test bench`):
#   times   reproduce --fix N --device cuda per fix (FIXES, default all), process start included, and where the start
#           goes (tools/reproduce_times.py)
#   sweep   fix 2's full greedy sweep, one process per setting on the machine's CPU cores (tools/fix2_arms.py); with
#           SWEEP_CPUS (e.g. 2-15) it runs in the background on those cores and the later steps on FG_CPUS (e.g. 0-1),
#           so that the GPU steps' host thread has a core of its own; it is waited for before `times`
#   test    make gpu-test GPU_PY=python3: every notebook with the gpu and slow flags but SKIP_RE's (only NB_RE's where set, so that
#           the pages can be split over two calls), OMP_NUM_THREADS=NB_THREADS (default 2) each, then pytest -m "gpu or slow"
#   pytest  only pytest -m "gpu or slow"; tests that fail are run again with the wheels in $ALT_WHL first on the path
#           (e.g. an older numpy: Triton's interpreter before 3.7 fails with numpy >= 2.4, triton-lang/triton#9171)
#   nbs     the notebooks in NBS only (nbdev-test), with $ALT_WHL first on the path when it is set
#   bench   the engine benchmark (tools/engine_bench.py, BENCH_ARGS); FIX2_S=seconds adds fix 2's arms at k = 3
#           (tools/fix2_gpu.py)
# DEADLINE_S: a step that cannot start before it is skipped and later steps get what is left. Needs python3 with torch and
# triton; nbdev, execnb, ipython and fastcore come from the wheels in ${WHL:-.whl} (tools/gpu_wheels.txt). Writes into
# $OUT (default /tmp/out): run.log and results.tgz (the JSON runs and the logs).
set -uo pipefail
OUT=${OUT:-/tmp/out}; WHL=${WHL:-.whl}; STEPS=${STEPS:-times sweep test bench}; SITE=/tmp/vllm-pd-spec-gpu-site
R=$OUT/results; mkdir -p "$R"; T0=$(date +%s); DEADLINE_S=${DEADLINE_S:-100000}
exec > >(tee -a "$OUT/run.log") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE $WHL/*.whl || exit 2
if [ -n "${ALT_WHL:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/alt-site $ALT_WHL/*.whl || exit 2
fi
export PYTHONPATH=$SITE:$PWD PYTHONUNBUFFERED=1 TQDM_DISABLE=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import os, numpy, torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, 'cpus', os.cpu_count())"
rc=0; last=0; FG=${FG_CPUS:+taskset -c $FG_CPUS}
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
step() {  # step LOG COMMAND...: run it (at most the time left), output (profiler noise dropped) to the screen and LOG
  local log=$1; shift; local t=$(date +%s%N) l=$(left)
  if [ "$l" -le 5 ]; then echo "== skipped (deadline): $*" | tee -a "$log"; rc=1; return; fi
  timeout $l "$@" 2>&1 | grep --line-buffered -v USDT | tee -a "$log"; local s=${PIPESTATUS[0]}
  echo "== $*: exit $s in $(( ($(date +%s%N) - t) / 1000000 )) ms" | tee -a "$log"; last=$s; [ $s = 0 ] || rc=1
}
SWEEP_PID=
wait_sweep() {
  [ -n "$SWEEP_PID" ] || return 0
  local l=$(left); while kill -0 $SWEEP_PID 2>/dev/null && [ $(left) -gt 0 ]; do sleep 2; done
  kill -0 $SWEEP_PID 2>/dev/null && { echo "== sweep cut at the deadline"; kill $SWEEP_PID; rc=1; }
  wait $SWEEP_PID; cat $R/sweep.log; SWEEP_PID=
}
SKIP_RE=${SKIP_RE:-^_}  # notebooks whose name starts with _ are not pages
for s in $STEPS; do case $s in
  times) wait_sweep; step $R/times.log python3 tools/reproduce_times.py --device ${TIMES_DEVICE:-cuda} --fixes ${FIXES:-1,2,3,4,5,6} ${WHOLE:+--whole} \
           --out $R/reproduce_times_h200.json ;;
  sweep) if [ -n "${SWEEP_CPUS:-}" ]; then
           ( t=$(date +%s%N); timeout $(left) taskset -c $SWEEP_CPUS python3 tools/fix2_arms.py --models text-attn text-hybrid \
               --processes ${SWEEP_PROCS:-18} ${SWEEP_ARGS:-} --out $R/fix2_sweep_h200.json > $R/sweep.log 2>&1
             echo "== sweep on cores $SWEEP_CPUS: exit $? in $(( ($(date +%s%N) - t) / 1000000 )) ms" >> $R/sweep.log ) &
           SWEEP_PID=$!
         else step $R/sweep.log python3 tools/fix2_arms.py --models text-attn text-hybrid --processes ${SWEEP_PROCS:-18} ${SWEEP_ARGS:-} --out $R/fix2_sweep_h200.json; fi ;;
  test)  export OMP_NUM_THREADS=${NB_THREADS:-2}  # NB_WORKERS pages at once, each with torch's default of one thread per core, oversubscribe
         step $R/gpu_test.log $FG make --no-print-directory gpu-test GPU_PY=python3 WHL=$WHL GPU_SITE=$SITE \
           GPU_TEST_ARGS="--n-workers ${NB_WORKERS:-8} --timing --skip-file-re '$SKIP_RE'${NB_RE:+ --file-re '$NB_RE'}"
         unset OMP_NUM_THREADS ;;
  pytest) step $R/pytest.log $FG python3 -m pytest tests/ -q -m "gpu or slow" -o cache_dir=/tmp/pytest-cache
         if [ "$last" != 0 ] && [ -n "${ALT_WHL:-}" ]; then
           echo "== again, the failed tests only, with $(ls $ALT_WHL) first on the path" | tee -a $R/pytest.log
           PYTHONPATH=/tmp/alt-site:$PYTHONPATH step $R/pytest.log $FG python3 -m pytest tests/ -q -m "gpu or slow" -o cache_dir=/tmp/pytest-cache --lf
         fi ;;
  nbs)   for nb in ${NBS:-}; do PYTHONPATH=${ALT_WHL:+/tmp/alt-site:}$PYTHONPATH step $R/nbs.log $FG python3 $SITE/bin/nbdev-test nbs/$nb --flags "gpu slow"; done ;;
  bench) step $R/bench.log $FG python3 tools/engine_bench.py ${BENCH_ARGS:-} --out $R/engine_bench.json
         [ -z "${FIX2_S:-}" ] || step $R/bench.log $FG timeout $FIX2_S python3 tools/fix2_gpu.py --ks 3 --out $R/fix2_gpu_graphs.json ;;
esac; done
wait_sweep
tar czf "$OUT/results.tgz" -C "$R" .
exit $rc
