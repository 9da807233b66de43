#!/usr/bin/env bash
# The text models' H200 runs. Needs torch and triton there; fla-core and fastcore travel as wheels in .whl/
# (git-ignored), fetched here with:
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl fla-core==0.6.0 fastcore==2.2.41
# Each part fits one 10-minute command; everything lands in $OUT/results.tgz.
#   bash nbs/runs/train_text_h200.sh train   # text-hybrid with text-attn's recipe (seed 0, 1822 + 1822 steps of 32 x 512),
#                                            # then ms per training step with GDN on fla and on our chunked form
#   bash nbs/runs/train_text_h200.sh bench   # GDN kernels side by side (gdn_bench), then the GPU tests
# Back here: tar xzf results.tgz; cp r/text-hybrid/* vllm_pd_spec/data/; cp r/*.json r/*.log r/*.txt nbs/runs/text_h200_run2/
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=$OUT/r; mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
[ -f .whl/model_tree.tgz ] && tar xzf .whl/model_tree.tgz  # a worktree's files, where the machine gets another checkout
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/machine.txt
python3 -c "import torch, triton, fla; print('torch', torch.__version__, 'triton', triton.__version__, 'fla', fla.__version__)" >> $R/machine.txt 2>&1
T0=$(date +%s); t() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/times_$MODE.txt; }
MODE=${1:-train}
if [ $MODE = train ]; then
  timeout 480 python3 -m vllm_pd_spec.model.train_text --name text-hybrid --tokenizer bpe1024 --device cuda \
    --target-steps 1822 --drafter-steps 1822 --out $R/text-hybrid > $R/text-hybrid.log 2>&1
  t train
  timeout 90 python3 -c "import json, torch; torch.backends.cuda.matmul.allow_tf32 = True; from vllm_pd_spec.model.train_text import time_backends; json.dump(time_backends('hybrid', steps=20), open('$R/backend_ms.json', 'w'), indent=1)" > $R/backend.log 2>&1
  t backends
else
  timeout 300 python3 -c "import json; from vllm_pd_spec.model.gdn import gdn_bench; json.dump(gdn_bench(), open('$R/gdn_bench.json', 'w'), indent=1)" > $R/gdn_bench.log 2>&1
  t bench
  timeout 240 python3 -m pytest tests/test_gdn.py tests/test_model_text.py -m gpu -q -s -p no:cacheprovider > $R/pytest_gpu.log 2>&1
  t pytest
fi
cd $OUT && tar czf results.tgz r && rm -rf r
