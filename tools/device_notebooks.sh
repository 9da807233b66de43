#!/usr/bin/env bash
# Run every notebook with the `gpu` and `slow` flags on a CUDA machine that has torch and triton but no
# nbdev, saving outputs into the notebooks, then the GPU/slow pytest tests; pack the notebooks into
# $OUT/nbs.tgz to bring them back. Wheels for nbdev, execnb, ipython and their pure-Python needs travel
# in .whl/ (git-ignored; see README "Running the notebooks on a GPU").
#   bash tools/device_notebooks.sh            (on the GPU machine, from the repo root)
#   ONLY_BENCH=1 bash tools/device_notebooks.sh   (only the timed notebooks)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/machine.txt"
start=$(date +%s)
# Timed notebooks run alone, one after the other, after the rest: a benchmark sharing the machine with other
# notebooks measures them too.
BENCH='20_triton_kernel_guard.ipynb 24_kernel_bench.ipynb'
if [ -z "${ONLY_BENCH:-}" ]; then
  nbdev-test --flags "gpu slow" --save --n-workers 4 --timing --skip-file-re '^(_|06_triton|06b_)' 2>&1 | tee "$OUT/nbdev-test.log"; nb_rc=${PIPESTATUS[0]}
else nb_rc=0; fi
for nb in $BENCH; do
  nbdev-test nbs/$nb --flags "gpu slow" --save --n-workers 1 2>&1 | tee -a "$OUT/nbdev-test.log"; [ ${PIPESTATUS[0]} = 0 ] || nb_rc=1
done
echo "nbdev-test rc=$nb_rc in $(( $(date +%s) - start )) s" | tee -a "$OUT/nbdev-test.log"
python3 -m pytest tests -q -m "gpu or slow" -p no:cacheprovider 2>&1 | tail -15 | tee "$OUT/pytest-gpu.log"
tar czf "$OUT/nbs.tgz" nbs/*.ipynb
exit $nb_rc
