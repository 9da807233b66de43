#!/usr/bin/env bash
# The H200 run that trained the conv MTP variant (ours), text-attn-convmtp, and measured its pre-registered gates and
# costs, in one command of at most 10 minutes:
#   1. on the GPU: the variant's MTP depths on text-attn's shipped target, frozen (the drafter stage's recipe: seed 0,
#      1822 steps of 32 x 512 tokens), with a 240 s step budget as a guard (fewer steps, recorded, only if the pace needs it);
#   2. meanwhile on the CPUs: the shipped text-attn MTP's zeroed-KV and last-positions costs (the comparison, same protocol);
#   3. then on the CPUs: the variant's gates and both costs (the engine in float64, standalone, as the gates page measures).
# Needs torch on the machine; fastcore travels as a wheel in .whl/ (git-ignored), fetched with:
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl fastcore==2.2.41
# Run from the repository root:  bash nbs/runs/train_convmtp_h200.sh      (everything lands in $OUT/results.tgz)
# Dry run on a CPU, tiny sizes:  DRY_RUN=1 OUT=/tmp/dry bash nbs/runs/train_convmtp_h200.sh
# Back here: tar xzf results.tgz; cp r/*.* nbs/runs/convmtp_h200_runN/ (the weights stay out of the run folder), and
#   cp r/text-attn-convmtp/text_attn_convmtp.* vllm_pd_spec/data/   (whatever the gates say: the card records the verdicts)
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=$OUT/r; mkdir -p $R
T0=$(date +%s); t() { echo "$1 $2 rc=$3 at $(( $(date +%s) - T0 )) s" | tee -a $R/times.txt; }
if [ "${DRY_RUN:-0}" = 1 ]; then
  DEV=cpu; SIZE=--tiny; STEPS="--drafter-steps 4"; GATES="n_prompts=2, prompt_len=64, max_tokens=8"; SITE=
else
  DEV=cuda; SIZE=; STEPS="--drafter-steps 1822 --time-budget 240"; GATES=""; SITE=/tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE .whl/fastcore*.whl || exit 1
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/machine.txt
fi
export PYTHONPATH=$SITE:$PWD PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__)" >> $R/machine.txt 2>&1
GATE_PY="
import json, sys, torch
from vllm_pd_spec.experiments.model_gates import measure_model, record_gates, check_gates
torch.set_num_threads(7)
name, w, out = sys.argv[1], sys.argv[2] or None, sys.argv[3]
rep = measure_model(name, weights=w, methods=('mtp',), last_ks=(2, 3, 4), $GATES)
if w: record_gates(rep, w)
json.dump(rep, open(out, 'w'), indent=1)
for g, ok in check_gates(rep).items(): print(name, g, 'PASS' if ok else 'FAIL')"

# 1. the variant on the GPU; 2. at once, the shipped text-attn MTP's costs on the CPUs
timeout 150 nice python3 -c "$GATE_PY" text-attn '' $R/text_attn_costs.json > $R/text_attn_costs.log 2>&1 &
CMP=$!
timeout 300 python3 -m vllm_pd_spec.model.train_text --name text-attn-convmtp --device $DEV $SIZE $STEPS \
  --out $R/text-attn-convmtp > $R/text-attn-convmtp.log 2>&1
t train text-attn-convmtp $?
# 3. the variant's gates and costs on the CPUs
timeout 200 python3 -c "$GATE_PY" text-attn-convmtp $R/text-attn-convmtp/text_attn_convmtp.safetensors $R/gates.json > $R/gates.log 2>&1
t gates text-attn-convmtp $?
wait $CMP; t costs text-attn $?
python3 -c "
from pathlib import Path
new = Path('$R/text-attn-convmtp/text_attn_convmtp.safetensors'); data = Path('vllm_pd_spec/data')
sizes = {p.name: p.stat().st_size for p in data.glob('*.safetensors') if p.name != new.name} | {new.name: new.stat().st_size}
print(sizes, f'total {sum(sizes.values()) / 2**20:.2f} MiB with the variant (budget 8 MiB)')" > $R/weights_budget.txt 2>&1
echo "done ($(( $(date +%s) - T0 )) s)" | tee -a $R/times.txt
cd $OUT && tar czf results.tgz r && rm -rf r   # one file back (the weights and card with the logs)
