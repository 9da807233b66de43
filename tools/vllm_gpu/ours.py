"""Our engine with the settings of the vLLM run, on a CPU: the figures the page puts beside vLLM's.

    python tools/vllm_gpu/ours.py nbs/runs/vllm_itself_h200/vllm_itself.json nbs/runs/vllm_itself_ours.json

Fix 3: `fix3_case` for the prompt lengths and block size vLLM's P ran (legacy = 0.27.1's hook order, fixed = 0.33.0's).
Fixes 5 and 6: the P/D pair on text-hybrid (float64), MTP k=1, the same 16 prompts of 64 byte ids and 64 tokens each,
with the row rule 0.25.0 ships (#47466's, our '0.27.1') against main between #45237 and #47466, and the kernel guard on
against off (row rule #47466's, as 0.25.0's model runner V2).
"""
import json, sys, time
from pathlib import Path
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

def fix3_rows(run:dict)->list:
    from vllm_pd_spec.config import Fixes
    from vllm_pd_spec.experiments.ordering import fix3_case
    r = run['results']['fix3_shipped']
    B = r['engine']['block_size']
    return [dict(case=p['case'], N=p['num_prompt_tokens'], block_size=B,
                 legacy=fix3_case(p['num_prompt_tokens'], B, fixes=Fixes().off('truncation_ordering')),
                 fixed=fix3_case(p['num_prompt_tokens'], B, fixes=Fixes())) for p in r['pairs']]

def pd_rows(prompts:list, k:int, max_tokens:int)->dict:
    import torch
    from vllm_pd_spec.config import Fixes
    from vllm_pd_spec.experiments.common import Arm, serve, match_summary, STANDALONE, torch_threads
    from vllm_pd_spec.experiments.guard import kernel_backend
    from vllm_pd_spec.model.drafters import load_model
    model = load_model('text-hybrid', torch.float64)
    backend = kernel_backend('cpu')
    arms = {  # our arm: (fix, what it stands for in vLLM's run)
        'rule #47466 (0.25.0)': (5, Arm('rule #47466', role='legacy', runner=dict(gdn_rule='0.27.1'), label="0.25.0's row rule (#47466)")),
        'rule before #47466': (5, Arm('rule before #47466', role='legacy', runner=dict(gdn_rule='0.24.0'), label='main between #45237 and #47466')),
        'guard on (0.25.0 V2)': (6, Arm('guard on', runner=dict(gdn_rule='0.27.1'), label="0.25.0's kernel, row rule #47466")),
        'guard off': (6, Arm('guard off', Fixes().off('kernel_guard'), 'legacy', runner=dict(gdn_rule='0.27.1'), label='main between #45237 and #47466')),
    }
    out, t0 = {}, time.time()
    with torch_threads(2):
        ref = serve(STANDALONE, model, prompts, k=k, max_tokens=max_tokens, runner_switches=dict(input_backend=backend)).outputs
        for name, (fix, arm) in arms.items():
            got = serve(arm, model, prompts, k=k, max_tokens=max_tokens, runner_switches=dict(input_backend=backend)).outputs
            out[name] = dict(fix=fix, label=arm.label, **match_summary(got, ref))
            print(name, out[name]['exact_match_rate'], f'{time.time() - t0:.0f} s', flush=True)
    return dict(model='text-hybrid (ours, trained; float64, CPU)', k=k, max_tokens=max_tokens, num_prompts=len(prompts),
                prompt_len=len(prompts[0]), input_backend=backend, arms=out)

if __name__ == '__main__':
    run = json.loads(Path(sys.argv[1]).read_text())
    prompts = json.loads((ROOT / '.cache/vllm-gpu/prompts.json').read_text()) if len(sys.argv) < 4 else json.loads(Path(sys.argv[3]).read_text())
    t0 = time.time()
    res = dict(command='python tools/vllm_gpu/ours.py ' + ' '.join(sys.argv[1:]), fix3=fix3_rows(run))
    print('fix 3 done', flush=True)
    res['pd'] = pd_rows(prompts['pd_prompts'], 1, 64)
    res['seconds'] = round(time.time() - t0, 1)
    Path(sys.argv[2]).write_text(json.dumps(res, indent=1))
