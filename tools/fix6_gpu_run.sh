#!/usr/bin/env bash
# Fix 6's accuracy experiment through the compiled Triton kernel, in one go: both models (text-attn, text-hybrid), MTP
# k in {1, 2, 3, 4}, 16 held-out prompts of 128 tokens, 64 tokens each, standalone vs P/D with the guard off and the
# placeholder padding on (main between #45237 and #47466), the guard on (0.33.0), and 0.24.0 as released (no guard,
# no padding), every runner assembling its inputs through the fused kernel
# (`vllm_pd_spec.experiments.guard.run(device='cuda', full=True)`, input_backend='triton').
#   bash tools/fix6_gpu_run.sh                 on the GPU machine, from the repo root: writes nbs/runs/fix6_full_h200.json
#   bash tools/fix6_gpu_run.sh --cpu-dry-run   the same code on a CPU through Triton's interpreter, the default (small)
#                                              sweep: writes $OUT/fix6_dry_run.json only
# Needs python3 with torch, triton and numpy; no vLLM. fastcore, tokenizers and safetensors, where python3 lacks them,
# come from wheels in .whl/ (git-ignored; carry it to the GPU machine), fetched once with:
#   python3 -m pip download --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 --python-version 3.10 \
#     -d .whl fastcore==2.2.41 tokenizers==0.23.3 safetensors==0.8.0
# The JSON and the log are also copied into $OUT (default /tmp/out). Exit status: 0 when the fixed arm holds the
# invariant (every P/D continuation equals standalone's), 1 otherwise, 2 on a bad argument or a missing dependency.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
case "${1:-}" in
  --cpu-dry-run) DEVICE=cpu; FULL=False; SAVE=$OUT/fix6_dry_run.json ;;
  "") DEVICE=cuda; FULL=True; SAVE=nbs/runs/fix6_full_h200.json
      nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/fix6_machine.txt" \
        || { echo "fix6_gpu_run: no GPU (nvidia-smi failed); for a rehearsal add --cpu-dry-run" >&2; exit 2; } ;;
  *) echo "usage: bash tools/fix6_gpu_run.sh [--cpu-dry-run]" >&2; exit 2 ;;
esac
SITE=
if ! python3 -c "import fastcore, tokenizers, safetensors" 2>/dev/null; then
  ls .whl/*.whl >/dev/null 2>&1 || { echo "fix6_gpu_run: python3 lacks fastcore/tokenizers/safetensors and .whl/ is empty (see the header)" >&2; exit 2; }
  SITE=/tmp/fix6_site; python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE .whl/*.whl || exit 2
fi
export PYTHONPATH=${SITE:+$SITE:}$PWD PYTHONUNBUFFERED=1
start=$(date +%s)
timeout 580 python3 - "$DEVICE" "$FULL" "$SAVE" <<'EOF' 2>&1 | tee "$OUT/fix6_gpu_run.log"
import json, sys, time, torch, triton
from vllm_pd_spec.experiments.guard import run
device, full, save = sys.argv[1], sys.argv[2] == 'True', sys.argv[3]
t0 = time.time()
res = run(device=device, full=full)
res.seconds, res.device = round(time.time() - t0, 1), device
res.setup |= dict(machine=torch.cuda.get_device_name() if device == 'cuda' else 'cpu', torch=torch.__version__,
                  triton=triton.__version__, command='bash tools/fix6_gpu_run.sh' + ('' if device == 'cuda' else ' --cpu-dry-run'))
with open(save, 'w') as fh: json.dump(res.to_json(), fh, indent=1, default=str)
for r in res.rows: print(r['model'], 'k', r['k'], r['arm'], r['backend'], 'exact match', r['exact_match_rate'], 'first divergence', r['mean_first_divergence'])
print('saved', save, 'invariant holds:', res.invariant_holds)
sys.exit(0 if res.invariant_holds else 1)
EOF
rc=${PIPESTATUS[0]}
[ "$SAVE" = "$OUT/fix6_dry_run.json" ] || cp "$SAVE" "$OUT/" 2>/dev/null
echo "fix6_gpu_run: exit $rc after $(( $(date +%s) - start )) s; saved $SAVE" | tee -a "$OUT/fix6_gpu_run.log"
exit $rc
