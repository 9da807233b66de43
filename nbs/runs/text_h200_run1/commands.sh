# Call 1 (the four candidates at once; run from the repository root with .whl/ carried):
#!/usr/bin/env bash
# The H200 run of the text models: GDN kernels side by side, both targets with their drafters (two tokenizations,
# trained concurrently), GDN-backend timing of training steps alone, GPU tests. Everything lands in $OUT/results.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=$OUT/r; mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
[ -f .whl/model_tree.tgz ] && tar xzf .whl/model_tree.tgz
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/machine.txt
python3 -c "import torch, triton, fla; print('torch', torch.__version__, 'triton', triton.__version__, 'fla', fla.__version__)" >> $R/machine.txt 2>&1
T0=$(date +%s); t() { echo "$1 $(( $(date +%s) - T0 )) s" | tee -a $R/times.txt; }
timeout 90 python3 -c "import json; from vllm_pd_spec.model.gdn import gdn_bench; json.dump(gdn_bench(), open('$R/gdn_bench.json', 'w'), indent=1)" > $R/gdn_bench.log 2>&1
t bench
for v in text-hybrid:bpe1024 text-attn:bpe1024 text-hybrid:bytes text-attn:bytes; do
  n=${v%%:*}; k=${v##*:}
  timeout 330 python3 -m vllm_pd_spec.model.train_text --name $n --tokenizer $k --device cuda --time-budget ${BUDGET:-150} --out $R/$n-$k > $R/$n-$k.log 2>&1 &
done
wait
t train
timeout 45 python3 -c "import json, torch; torch.backends.cuda.matmul.allow_tf32 = True; from vllm_pd_spec.model.train_text import time_backends; json.dump(time_backends('hybrid', steps=20), open('$R/backend_ms.json', 'w'), indent=1)" > $R/backend.log 2>&1
t backends
cp $R/text-hybrid-bpe1024/* $R/text-attn-bpe1024/* vllm_pd_spec/data/
timeout 60 python3 -m pytest tests/test_gdn.py tests/test_model_text.py -m gpu -q -s -p no:cacheprovider > $R/pytest_gpu.log 2>&1
t pytest
cd $OUT && tar czf results.tgz r && rm -rf r

# Call 2 (text-hybrid alone, our chunked GDN form, 130 s step budget):
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 VLLM_PD_SPEC_GDN_BACKEND=torch; timeout 185 python3 -m vllm_pd_spec.model.train_text --name text-hybrid --tokenizer bpe1024 --device cuda --target-steps 1822 --drafter-steps 1822 --time-budget 130 --out $OUT/h
