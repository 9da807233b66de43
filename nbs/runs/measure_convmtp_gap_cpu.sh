#!/usr/bin/env bash
# The CPU half of the registered conv MTP variant's run (text-attn-convmtp-gap; the GPU half, its training, is
# nbs/runs/train_convmtp_gap_h200.sh, which runs this script after it when MEASURE=1): the engine in float64, standalone,
# as the gates page measures.
#   1. its gates and costs: measure_model (the MTP, k = 4, and the last k - 1 positions zeroed at k = 2, 3, 4), the verdicts
#      written into its card;
#   2. prompt_state_cost: its convolution state, its attention KV, both, zeroed right after the prefill (gate 1 reads 'conv');
#   3. the shipped weights' total against the 8 MiB budget, with the variant in place of the stand-in;
#   4. only if every registered gate passes: the variant ships (its weights and card copied to vllm_pd_spec/data/) and fix 2's
#      arms run on it (tools/fix2_arms.py), written to $FIX2_OUT (default nbs/runs/fix2_convmtp_gap.json).
# Run from the repository root, the run folder holding the training's results (the weights and card in text-attn-convmtp-gap/):
#   bash nbs/runs/measure_convmtp_gap_cpu.sh nbs/runs/convmtp_gap_run1      (THREADS for the gates, PROCESSES for the arms)
# Dry run (tiny sizes; the arms run whatever the gates say; use a scratch copy of the tree, since step 4 writes into the package):
#   DRY_RUN=1 bash nbs/runs/measure_convmtp_gap_cpu.sh /tmp/dry/r
set -uo pipefail
R=$1; W=$R/text-attn-convmtp-gap/text_attn_convmtp_gap.safetensors
TH=${THREADS:-2}; PROC=${PROCESSES:-$(nproc)}; FIX2_OUT=${FIX2_OUT:-nbs/runs/fix2_convmtp_gap.json}
if [ "${DRY_RUN:-0}" = 1 ]; then
  GATES="n_prompts=2, prompt_len=64, max_tokens=8,"; PSC="n_prompts=2, prompt_len=64, max_tokens=16,"; ARMS="--ks 2 --seeds 0 --num-prompts 1 --max-tokens 8"
else GATES=; PSC=; ARMS=; fi
T0=$(date +%s); t() { echo "$1 $2 rc=$3 at $(( $(date +%s) - T0 )) s" | tee -a $R/times_cpu.txt; }
export PYTHONPATH=${PYTHONPATH:-}:$PWD PYTHONUNBUFFERED=1
python3 -c "import os, platform, torch; print(platform.machine(), os.cpu_count(), 'CPUs; torch', torch.__version__)" > $R/machine_cpu.txt
python3 -c "
import json, sys, torch
from vllm_pd_spec.experiments.model_gates import measure_model, record_gates, check_gates, prompt_state_cost
torch.set_num_threads($TH)
rep = measure_model('text-attn-convmtp-gap', $GATES weights='$W', methods=('mtp',), last_ks=(2, 3, 4))
record_gates(rep, '$W')
json.dump(rep, open('$R/gates.json', 'w'), indent=1)
for g, ok in check_gates(rep).items(): print('text-attn-convmtp-gap', g, 'PASS' if ok else 'FAIL')
psc = prompt_state_cost('text-attn-convmtp-gap', $PSC weights='$W')
json.dump(dict(command=\"prompt_state_cost('text-attn-convmtp-gap')\", runs=[psc]), open('$R/prompt_state_cost.json', 'w'), indent=1)
ok = psc['conv']['cost_first'] >= 0.10
print('text-attn-convmtp-gap', f\"prompt_state_cost conv cost_first >= 0.10 ({psc['conv']['cost_first']:.3f})\", 'PASS' if ok else 'FAIL')
sys.exit(0 if ok and all(check_gates(rep).values()) else 3)" > $R/gates.log 2>&1
rc=$?; t gates text-attn-convmtp-gap $rc
python3 -c "
from pathlib import Path
new = Path('$W'); data = Path('vllm_pd_spec/data')
sizes = {p.name: p.stat().st_size for p in data.glob('*.safetensors') if p.name not in (new.name, 'text_attn_convmtp.safetensors')} | {new.name: new.stat().st_size}
print(sizes, f'total {sum(sizes.values()) / 2**20:.2f} MiB with the variant in place of the stand-in (budget 8 MiB)')" > $R/weights_budget.txt 2>&1
if [ $rc = 0 ] || [ "${DRY_RUN:-0}" = 1 ]; then
  cp $R/text-attn-convmtp-gap/text_attn_convmtp_gap.* vllm_pd_spec/data/   # it passed: it ships (the arms load the shipped weights)
  python3 tools/fix2_arms.py --models text-attn-convmtp-gap --processes $PROC $ARMS --out $FIX2_OUT > $R/fix2_arms.log 2>&1
  t arms text-attn-convmtp-gap $?
fi
echo "done ($(( $(date +%s) - T0 )) s)" | tee -a $R/times_cpu.txt
