#!/usr/bin/env bash
# The input-assembly kernels on a GPU, in one go (about 4 minutes on an H200): the compiled kernel tests marked gpu
# (ours vs the reference and vs vLLM 0.33.0's own kernels, on random batches and steps), an in-process comparison with
# vLLM's kernels, and the benchmark (batch 1..4096, k 1/3/7, a quarter prompt-tail rows: eager, CUDA-graph, host and
# device medians of ours and vLLM's, the empty-launch floor, ratios and targets). Needs python3 with torch, triton,
# pytest and hypothesis; no vLLM install: VLLM_DIR is an unpacked vLLM (the folder holding vllm/), the vllm/ package
# itself, or a folder holding just its v1/worker/gpu/input_batch.py.
#   bash tools/kernel_gpu_run.sh VLLM_DIR                 on the GPU machine, from the repo root
#   bash tools/kernel_gpu_run.sh VLLM_DIR --cpu-dry-run   the same code on a CPU through the Triton interpreter, tiny sizes
# Writes nbs/runs/kernel_bench.json (the dry run: $OUT/kernel_bench_dry_run.json only) and copies it, with the log, into
# $OUT (default /tmp/out). The JSON is rewritten after every stage and benchmark row, so a failure leaves what was
# measured, and the errors. Exit status: 0 when every test passed, ours equals vLLM's everywhere and the benchmark is
# complete; 1 otherwise; 2 on a bad argument.
set -uo pipefail
if [ $# -lt 1 ] || [ ! -e "$1" ]; then echo "usage: bash tools/kernel_gpu_run.sh VLLM_DIR [--cpu-dry-run]" >&2; exit 2; fi
VLLM_DIR=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); shift
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if [ "${1:-}" = "--cpu-dry-run" ]; then
  SAVE=$OUT/kernel_bench_dry_run.json; EXTRA=(--cpu-dry-run)
else
  SAVE=nbs/runs/kernel_bench.json; EXTRA=()
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/kernel_machine.txt" \
    || { echo "kernel_gpu_run: no GPU (nvidia-smi failed); for a rehearsal add --cpu-dry-run" >&2; exit 2; }
fi
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available())" \
  | tee -a "$OUT/kernel_machine.txt"
start=$(date +%s)
python3 -c "import sys; from vllm_pd_spec.cli import main; sys.exit(main(sys.argv[1:]))" \
  bench kernel --vllm "$VLLM_DIR" --save "$SAVE" --tests "${EXTRA[@]}" 2>&1 | tee "$OUT/kernel_gpu_run.log"
rc=${PIPESTATUS[0]}
[ "$SAVE" = "$OUT/kernel_bench_dry_run.json" ] || cp "$SAVE" "$OUT/" 2>/dev/null
echo "kernel_gpu_run: exit $rc after $(( $(date +%s) - start )) s; saved $SAVE" | tee -a "$OUT/kernel_gpu_run.log"
[ $rc = 0 ] || echo "kernel_gpu_run: FAILED (status and errors in $SAVE)" >&2
exit $rc
