#!/bin/bash
# On the GPU machine, in the repository root (the folder holding this script is carried there):
#   bash .gpu/device.sh recv          keep this call's chunk under /tmp/vllm-gpu (the machine keeps /tmp while warm)
#   bash .gpu/device.sh run [SECONDS] reassemble (sha256 checked), unpack, build the checkpoint, run every experiment
# Writes to $OUT: env.json, ckpt.json, vllm_itself.json, logs.txt (and device.log).
set -u
G=$(cd "$(dirname "$0")" && pwd)
STORE=/tmp/vllm-gpu
mkdir -p "$STORE"
cp "$G"/site.tar.xz.* "$STORE"/
ls -la "$STORE"
[ "${1:-}" = recv ] && { nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv; exit 0; }
[ "${1:-}" = run ] || { echo "usage: device.sh recv | run [SECONDS]"; exit 2; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/device.log") 2>&1
T0=$(date +%s)
SHA=$(python3 -c "import json;print(json.load(open('$G/manifest.json'))['sha256'])")
N=$(python3 -c "import json;print(len(json.load(open('$G/manifest.json'))['parts']))")
HAVE=$(ls "$STORE"/site.tar.xz.* | wc -l)
[ "$HAVE" = "$N" ] || { echo "have $HAVE of $N chunks: the machine was given back between calls; upload again"; exit 3; }
cat "$STORE"/site.tar.xz.* > /tmp/site.tar.xz
echo "$SHA  /tmp/site.tar.xz" | sha256sum -c || exit 4
rm -rf /tmp/site && mkdir -p /tmp/site && tar -C /tmp/site -xJf /tmp/site.tar.xz || exit 5
echo "unpacked in $(( $(date +%s) - T0 )) s"
export PYTHONPATH=/tmp/site
python3 - <<'PY' > "$OUT/env.json"
import importlib, json, subprocess
out = dict(gpu=subprocess.run(['nvidia-smi', '--query-gpu=name,driver_version,memory.total', '--format=csv,noheader'],
                              capture_output=True, text=True).stdout.strip())
for m in ('torch', 'triton', 'transformers', 'vllm', 'nixl._api'):
    try: mod = importlib.import_module(m); out[m] = getattr(mod, '__version__', mod.__file__)
    except Exception as e: out[m] = f'import failed: {type(e).__name__}: {e}'
print(json.dumps(out))
PY
cat "$OUT/env.json" || exit 6
python3 "$G/ckpt.py" /tmp/ckpt > "$OUT/ckpt.json" || exit 7
echo "checkpoint built at $(( $(date +%s) - T0 )) s"
python3 "$G/experiments.py" all "$OUT" --ckpt /tmp/ckpt/qwen3_next_mtp --prompts "$G/prompts.json" --deadline "${2:-480}"
echo "done at $(( $(date +%s) - T0 )) s"
