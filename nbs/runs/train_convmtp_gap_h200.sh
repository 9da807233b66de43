#!/usr/bin/env bash
# The H200 run that trains the registered conv MTP variant that leans on its convolution state, text-attn-convmtp-gap
# (the gates page registers it: each depth's attention skips the 3 positions before the query), in one command:
#   on the GPU, the variant's MTP depths on text-attn's shipped target, frozen, with the conv MTP stand-in's recipe (seed 0,
#   1822 steps of 32 x 512 tokens), a 120 s step budget as a guard (fewer steps, recorded, only if the pace needs it).
# With MEASURE=1 the same command then runs the CPU half on that host's CPUs (nbs/runs/measure_convmtp_gap_cpu.sh: the
# gates, prompt_state_cost, and fix 2's arms if every gate passes, in float64), under 10 minutes in all; without it, run
# that script afterwards on any CPUs:  bash nbs/runs/measure_convmtp_gap_cpu.sh RUN_FOLDER
# Needs torch on the machine; fastcore travels as a wheel in .whl/ (git-ignored), fetched with:
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl fastcore==2.2.41
# Run from the repository root:  bash nbs/runs/train_convmtp_gap_h200.sh      (everything lands in $OUT/results.tgz)
#   MEASURE=1 bash nbs/runs/train_convmtp_gap_h200.sh                       (training, then the CPU half, one command)
# Dry run on a CPU, tiny sizes, in a scratch copy of the tree:  DRY_RUN=1 MEASURE=1 OUT=/tmp/dry bash nbs/runs/train_convmtp_gap_h200.sh
# Back here: tar xzf results.tgz; cp r/*.* nbs/runs/convmtp_gap_run1/; r/fix2_convmtp_gap.json to nbs/runs/ (if the arms ran);
#   the weights and card r/text-attn-convmtp-gap/text_attn_convmtp_gap.* to vllm_pd_spec/data/ only if every gate passed
#   (the gates page's registration), else to the run folder
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=$OUT/r; mkdir -p $R
T0=$(date +%s); t() { echo "$1 $2 rc=$3 at $(( $(date +%s) - T0 )) s" | tee -a $R/times.txt; }
if [ "${DRY_RUN:-0}" = 1 ]; then
  DEV=cpu; SIZE=--tiny; STEPS="--drafter-steps 4"; SITE=
else
  DEV=cuda; SIZE=; STEPS="--drafter-steps 1822 --time-budget 120"; SITE=/tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE .whl/fastcore*.whl || exit 1
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/machine.txt
fi
export PYTHONPATH=$SITE:$PWD PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__)" >> $R/machine.txt 2>&1
timeout 200 python3 -m vllm_pd_spec.model.train_text --name text-attn-convmtp-gap --device $DEV $SIZE $STEPS \
  --out $R/text-attn-convmtp-gap > $R/text-attn-convmtp-gap.log 2>&1
t train text-attn-convmtp-gap $?
if [ "${MEASURE:-0}" = 1 ]; then
  THREADS=14 PROCESSES=$(nproc) FIX2_OUT=$R/fix2_convmtp_gap.json timeout 400 bash nbs/runs/measure_convmtp_gap_cpu.sh $R
  t measure text-attn-convmtp-gap $?
fi
echo "done ($(( $(date +%s) - T0 )) s)" | tee -a $R/times.txt
cd $OUT && tar czf results.tgz r && rm -rf r   # one file back (the weights and card with the log)
