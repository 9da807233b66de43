"""The engine's decode step on one device: the batched drafter against the per-request path, in the same run.

    PYTHONPATH=. python3 tools/engine_bench.py                    # on a GPU: writes nbs/runs/engine_bench.json
    PYTHONPATH=. python3 tools/engine_bench.py --device cpu --dry-run --out /tmp/engine_bench_dry.json

Standalone engine, MTP with k = 3, greedy. Per model (text-attn, text-hybrid), dtype (float32, bfloat16), batch (1, 16,
64 requests in flight, each a 64-token held-out prompt) and drafter path (`ModelRunner.batched_drafter` True: one drafter
pass per engine step and, on CUDA, the attention that reads every row at once; False: one pass per request and the
attention's loop over rows, the path before), after a warm-up run: one timed run (step time, TPOT, output tokens/s,
drafter forwards per step) and a profiled window of decode steps on a fresh run (kernel launches per step, GPU busy
share, from torch.profiler). The two paths' outputs are compared (equal tokens expected in float32; bfloat16 may
differ where two logits tie after rounding). Each run is the experiments' kit's `serve` with `tools/fix2_gpu.py`'s timing and profiling observers. Writes one JSON
file after every row, so a run cut short keeps what it measured.
"""
import argparse, importlib.util, json, platform, statistics, sys, time
from pathlib import Path
import torch

_spec = importlib.util.spec_from_file_location('fix2_gpu', Path(__file__).with_name('fix2_gpu.py'))
F = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(F)

def prompts_for(model:str, n:int, prompt_len:int, standins:bool)->list:
    "`n` prompts of `prompt_len` tokens cut from the tool's pool of 32 held-out prompts of 256 tokens."
    pool = F.prompt_pool(model, standins)
    cut = [p[i:i + prompt_len] for p in pool for i in range(0, len(p) - prompt_len + 1, prompt_len)]
    if len(cut) < n: sys.exit(f'{n} prompts of {prompt_len} tokens: the pool gives {len(cut)}')
    return cut[:n]

def bench_row(model, batched:bool, prompts, warm, k, max_tokens, device, profile_window)->dict:
    "One path at one batch size: timings, drafter forwards per step, and a profiled window."
    from vllm_pd_spec.engine.llm_engine import StepObserver
    from vllm_pd_spec.engine.runner import ModelRunner, SamplingParams
    from vllm_pd_spec.experiments.backoff import ARMS
    from vllm_pd_spec.experiments.common import serve
    from vllm_pd_spec.model import model as M
    ModelRunner.batched_drafter, M.PAGED_ATTENTION = batched, (None if batched else 'rows')  # the baseline: the path before batching
    arm = ARMS['standalone']
    kw = dict(method='mtp', k=k, sampling=SamplingParams(), max_tokens=max_tokens, max_num_seqs=len(prompts),
              max_num_batched_tokens=max(512, len(prompts[0]) * 2), device=device)
    serve(arm, model, warm, **kw)
    calls, per_step = [], []  # drafter forwards (the runner's own copy of the weights: it copies the caller's when their device or dtype differ)
    def observers(engines):
        timer, runner = F.timing_observer(device)(engines)[0], engines[-1].runner
        hooks.append(runner.model.mtp.register_forward_pre_hook(lambda *_: calls.append(1)))
        return [timer, StepObserver(on_output=lambda *_: per_step.append(len(calls) - sum(per_step)))]
    hooks = []
    try: s = serve(arm, model, prompts, observers=observers, **kw)
    finally:
        for h in hooks: h.remove()
    timer, outputs = s.observers[0], s.outputs
    first, dur, toks = {}, {}, {}
    for i, (d, got) in enumerate(timer.steps):
        for rid, n in got.items():
            if rid not in first: first[rid], toks[rid], dur[rid] = i, n - 1, 0.0
            else: toks[rid] += n; dur[rid] += d
    tpot = [dur[r] / toks[r] for r in first if toks[r] > 0]
    steps = [d for d, _ in timer.steps]
    decode = [d for (d, got), f in zip(timer.steps, per_step) if len(got) == len(prompts)]  # steps where every request decodes
    n_out = sum(len(o) for o in outputs)
    try:  # a profiled window of decoding steps on a fresh run
        p = serve(arm, model, prompts, observers=F.profile_observer(len(prompts), profile_window, device), **kw).observers[0]
        p.stop()
        bound = p.result or dict(profiled_steps=0, note='the run ended before the profiled window')
    except Exception as e: bound = dict(profiled_steps=0, note=f'the profiler failed: {type(e).__name__}: {e}')
    return dict(batched_drafter=batched, attention='default' if batched else 'rows', batch=len(prompts), k=k, output_tokens=n_out, steps=len(steps),
                step_ms_median=1e3 * statistics.median(steps), decode_step_ms_median=1e3 * statistics.median(decode) if decode else None,
                tpot_ms_median=1e3 * statistics.median(tpot) if tpot else None, output_tokens_per_s=n_out / max(sum(steps), 1e-9),
                drafter_forwards_per_step_max=max(per_step), execute_share=sum(timer.execute_s) / max(sum(steps), 1e-9), **bound,
                outputs=outputs)

def check_paths(device:str, n:int=8, max_tokens:int=12)->dict:
    "Float64 on `device`, text-hybrid, per method: the batched drafter with the default attention against the per-request path with the row loop."
    from vllm_pd_spec.engine.runner import ModelRunner
    from vllm_pd_spec.model import model as M
    from vllm_pd_spec.engine.llm_engine import LLMEngine, make_config
    from vllm_pd_spec.config import SchedulerConfig
    from vllm_pd_spec.model.drafters import load_model
    m, prompts, got = load_model('text-hybrid', torch.float64, device=device), prompts_for('text-hybrid', n, 32, False), {}
    for method in ('mtp', 'eagle', 'dflash'):
        outs = []
        for batched, backend in ((True, None), (False, 'rows')):
            ModelRunner.batched_drafter, M.PAGED_ATTENTION = batched, backend
            eng = LLMEngine(make_config(method, 3, model=m, scheduler_config=SchedulerConfig(max_num_batched_tokens=64)), m,
                            device=device, dtype=torch.float64)
            with torch.no_grad(): outs.append((eng.generate(prompts, max_tokens=max_tokens), eng.spec_stats.num_accepted_tokens_per_pos))
        got[method] = outs[0] == outs[1]
    ModelRunner.batched_drafter, M.PAGED_ATTENTION = True, None
    return got

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default='nbs/runs/engine_bench.json')
    ap.add_argument('--device', default='cuda')
    ap.add_argument('--models', default='text-attn,text-hybrid')
    ap.add_argument('--dtypes', default='float32,bfloat16')
    ap.add_argument('--batches', default='1,16,64')
    ap.add_argument('--k', type=int, default=3)
    ap.add_argument('--prompt-len', type=int, default=64)
    ap.add_argument('--max-tokens', type=int, default=32)
    ap.add_argument('--profile-steps', type=int, default=4)
    ap.add_argument('--budget-s', type=float, default=330, help='stop starting new rows after this many seconds')
    ap.add_argument('--dry-run', action='store_true', help='tiny: text-attn, float32, batch 1 and 2, 16-token prompts, 6 tokens')
    ap.add_argument('--prompts-file', action='store_true', help="read text-attn's prompts from fix2_gpu's file, as where tokenizers is missing")
    a = ap.parse_args(argv)
    if a.device.startswith('cuda') and not torch.cuda.is_available(): sys.exit('--device cuda: torch sees no CUDA device')
    if a.dry_run: a.models, a.dtypes, a.batches, a.prompt_len, a.max_tokens, a.profile_steps = 'text-attn', 'float32', '1,2', 16, 6, 2
    if not a.device.startswith('cuda'): torch.set_num_threads(1)
    from vllm_pd_spec.model.drafters import load_model
    batches = [int(x) for x in a.batches.split(',')]
    run = dict(device=torch.cuda.get_device_name() if a.device.startswith('cuda') else platform.processor() or 'cpu',
               torch=torch.__version__, started=time.strftime('%Y-%m-%d %H:%M:%S'),
               args=dict(vars(a), out=Path(a.out).name), complete=False, rows=[])
    out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    run['float64_paths_equal'] = check_paths(a.device, *((2, 4) if a.dry_run else ()))
    print('float64, batched drafter + default attention == per-request + row loop:', run['float64_paths_equal'], flush=True)
    pools = {name: prompts_for(name, 2 * max(batches), a.prompt_len, a.prompts_file) for name in a.models.split(',')}
    for dt in a.dtypes.split(','):  # float32 for both models first: a run cut short by the budget keeps those
        for name, pool in pools.items():
            model = load_model(name, dict(float32=torch.float32, bfloat16=torch.bfloat16)[dt], device=a.device)
            for b in batches:
                ref = None
                for batched in (True, False):
                    if time.perf_counter() - t_start > a.budget_s: run['stopped'] = f'budget of {a.budget_s} s spent'; break
                    t0 = time.perf_counter()
                    row = bench_row(model, batched, pool[:b], pool[b:2 * b], a.k, a.max_tokens, a.device, a.profile_steps)
                    outs = row.pop('outputs'); ref = outs if ref is None else ref
                    row.update(model=name, dtype=dt, same_outputs_as_batched=outs == ref, wall_s=time.perf_counter() - t0)
                    run['rows'].append(row); out.write_text(json.dumps(run, indent=1))
                    print({x: (round(v, 4) if isinstance(v, float) else v) for x, v in row.items()}, flush=True)
    run['complete'] = 'stopped' not in run
    out.write_text(json.dumps(run, indent=1))
    print('wrote', out)

if __name__ == '__main__': main()
