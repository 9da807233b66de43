"""Fix 2's arms timed on one GPU: the P/D pair (both engines on the same device) and standalone, TPOT and output tokens/s.

    PYTHONPATH=. python3 tools/fix2_gpu.py                                              # on an H200: writes nbs/runs/fix2_gpu.json
    PYTHONPATH=. python3 tools/fix2_gpu.py --device cpu --dry-run --out /tmp/fix2_gpu_dry.json --prompts-file  # CPU, tiny

Each arm is served by the experiments' kit (`experiments.common.serve`: the engines built with the pool sized once, the
proxy's loop) with a timing observer on the decoding engine. It needs torch, fastcore and safetensors (on the GPU machine
from the wheels carried there); where `tokenizers` is missing it reads the held-out prompts tokenized in advance
(tools/fix2_gpu_prompts.json, written by `--write-prompts` where `tokenizers` is installed); `--prompts-file` forces that,
so that a CPU dry run takes the path a GPU machine without `tokenizers` takes.

Per arm (legacy, backoff, handoff, backoff+handoff, standalone) and per k, after a warm-up run on other prompts, one
timed run of the decoding engine. Measured, not derived from acceptance:
* TPOT per request: the decoding engine's step time (schedule + execute_model + update, synchronised) summed over the
  steps after the request's first token, over its tokens after the first; the median over requests;
* output tokens/s: the decoding engine's output tokens over the time its steps took (P's steps are not counted: on a
  real pair P is another GPU);
* what bounds them: per step, the share of the wall time the GPU was busy (CUDA kernel time from torch.profiler, over a
  profiled window of steps), kernel launches per step, host time in the scheduler and outside the model, peak memory;
  `host_bound` when the GPU is busy less than half of the step;
* tokens per target forward: output tokens over the decoding engine's steps (one target forward each), and vLLM's mean
  acceptance length.
Outputs are checked against standalone's (float64 greedy: equal). Writes one JSON file.
"""
import argparse, importlib.util, json, platform, statistics, sys, time
from pathlib import Path
import torch

PROMPTS = Path(__file__).with_name('fix2_gpu_prompts.json')  # the held-out prompts, tokenized in advance
POOL = dict(n=32, prompt_len=256)  # model_prompts(model, 32, 256): requests are the first --num-prompts, warm-up the next ones

def prompt_pool(model:str='text-attn', force_file:bool=False)->list:
    "`model_prompts(model, 32, 256)`: encoded here (bytes, or BPE when `tokenizers` is installed), else `text-attn`'s from `PROMPTS`."
    from vllm_pd_spec.model.drafters import model_prompts, model_tokenizer
    if model_tokenizer(model) == 'bytes' or (not force_file and importlib.util.find_spec('tokenizers') is not None):
        return model_prompts(model, POOL['n'], POOL['prompt_len'])
    if model != 'text-attn': sys.exit(f'{PROMPTS} holds text-attn\'s BPE prompts, not {model}\'s')
    if not PROMPTS.is_file(): sys.exit(f'{PROMPTS} is missing: write it with --write-prompts where tokenizers is installed')
    d = json.loads(PROMPTS.read_text())
    if {k: d[k] for k in POOL} != POOL: sys.exit(f'{PROMPTS} holds other prompts than {POOL}')
    return d['prompts']

_spec = importlib.util.spec_from_file_location('gpu_profile', Path(__file__).with_name('gpu_profile.py'))
G = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(G)  # the timing and profiling helpers
sync = G.sync

def timing_observer(device):
    "`observers(engines)` for the kit's `serve`: a `StepTimer` on the decoding engine (the engine's hooks time its steps)."
    return lambda engines: [G.StepTimer(device)]

def profile_observer(num_requests:int, n_steps:int, device):
    "`observers(engines)`: once every request has its first token on the decoding engine, profile its next `n_steps` steps."
    from torch.profiler import profile, ProfilerActivity
    from vllm_pd_spec.engine.llm_engine import StepObserver
    cuda = str(device).startswith('cuda')
    class Profiled(StepObserver):
        "GPU busy time, kernel launches and host operator calls over a window of decoding steps (torch.profiler), against their wall time."
        def __init__(self, engine): super().__init__(); self.engine, self.prof, self.done, self.result = engine, None, 0, None
        def on_output(self, scheduler_output, model_runner_output, outputs):
            if self.result is not None: return
            if self.prof is None:
                if len([r for r, o in self.engine.outputs.items() if o]) < num_requests: return
                sync(device); self.t = time.perf_counter()
                self.prof = profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])); self.prof.__enter__()
                return
            self.done += 1
            if self.done == n_steps: self.stop()
        def stop(self):
            if self.prof is None or self.result is not None: return
            sync(device); wall = time.perf_counter() - self.t; self.prof.__exit__(None, None, None)
            self.result = G.profile_stats(self.prof, wall, self.done, cuda)
    return lambda engines: [Profiled(engines[-1])]

def time_arm(arm, model, k, prompts, warm, max_tokens, device, sampling, profile_window):
    "One warm-up run, then one timed run of the arm and one profiled run; its timings and outputs."
    from vllm_pd_spec.experiments.common import serve
    kw = dict(method='mtp', k=k, sampling=sampling, max_tokens=max_tokens, max_num_seqs=len(prompts),
              max_num_batched_tokens=max(512, len(prompts[0]) * 2), device=device)
    serve(arm, model, warm, **kw)                                              # warm-up: allocator, kernels, caches
    if str(device).startswith('cuda'): torch.cuda.reset_peak_memory_stats()
    s = serve(arm, model, prompts, observers=timing_observer(device), **kw)
    timer, outputs, st = s.observers[0], s.outputs, s.stats
    tpot, _ = G.tpots(timer.steps)
    decode_s, n_out = sum(d for d, _ in timer.steps), sum(len(o) for o in outputs)
    try:  # what bounds the step: a profiled window of decoding steps on a fresh run
        p = serve(arm, model, prompts, observers=profile_observer(len(prompts), profile_window, device), **kw).observers[0]
        p.stop()
        bound = p.result or dict(profiled_steps=0, note='the run ended before the profiled window')
    except Exception as e: bound = dict(profiled_steps=0, note=f'the profiler failed: {type(e).__name__}: {e}')  # the timings stand
    return dict(arm=arm.name, ours=arm.ours, k=k, requests=len(prompts), output_tokens=n_out, decode_steps=len(timer.steps),
                tpot_ms_median=1e3 * statistics.median(tpot) if tpot else None,
                tpot_ms_p90=1e3 * statistics.quantiles(tpot, n=10)[-1] if len(tpot) > 1 else None,
                output_tokens_per_s=n_out / max(decode_s, 1e-9), decode_s=decode_s,
                tokens_per_target_forward=n_out / max(len(timer.steps), 1), mean_acceptance_length=st.mean_acceptance_length,
                schedule_share=sum(timer.schedule_s) / max(decode_s, 1e-9), execute_share=sum(timer.execute_s) / max(decode_s, 1e-9),
                peak_memory_gib=torch.cuda.max_memory_allocated() / 2 ** 30 if str(device).startswith('cuda') else None,
                **bound, host_bound=(bound['gpu_busy_share'] < 0.5) if bound.get('gpu_busy_share') is not None else None,
                outputs=outputs)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default='nbs/runs/fix2_gpu.json', help='JSON file to write (the fix-2 page reads nbs/runs/fix2_gpu.json)')
    ap.add_argument('--device', default='cuda')
    ap.add_argument('--model', default='text-attn', choices=['text-attn', 'text-hybrid'])
    ap.add_argument('--ks', default='2,3,4', help='MTP drafts per step, comma-separated')
    ap.add_argument('--num-prompts', type=int, default=16, help='requests in flight (one batch), at most 16')
    ap.add_argument('--prompt-len', type=int, default=256, help='tokens per prompt, at most 256')
    ap.add_argument('--max-tokens', type=int, default=128)
    ap.add_argument('--dtype', default='float32', choices=['float32', 'float64', 'bfloat16'])
    ap.add_argument('--profile-steps', type=int, default=8, help='decoding steps in the profiled window')
    ap.add_argument('--dry-run', action='store_true', help='tiny sizes (2 prompts of 32 tokens, 8 generated, k=2), e.g. on CPU')
    ap.add_argument('--prompts-file', action='store_true', help=f'read the prompts from {PROMPTS.name}, as where tokenizers is missing')
    ap.add_argument('--write-prompts', action='store_true', help=f'write {PROMPTS.name} (needs tokenizers) and exit')
    a = ap.parse_args(argv)
    if a.write_prompts:
        PROMPTS.write_text(json.dumps(dict(POOL, prompts=prompt_pool('text-attn'))) + '\n'); print('wrote', PROMPTS); return
    if a.device.startswith('cuda') and not torch.cuda.is_available(): sys.exit('--device cuda: torch sees no CUDA device')
    if a.dry_run: a.ks, a.num_prompts, a.prompt_len, a.max_tokens, a.profile_steps = '2', 2, 32, 8, 2
    if not 1 <= a.num_prompts <= POOL['n'] // 2: sys.exit(f'--num-prompts={a.num_prompts}: must be in 1..{POOL["n"] // 2}')
    if not 1 <= a.prompt_len <= POOL['prompt_len']: sys.exit(f'--prompt-len={a.prompt_len}: must be in 1..{POOL["prompt_len"]}')
    from vllm_pd_spec.config import SamplingParams
    from vllm_pd_spec.experiments.backoff import ARMS
    from vllm_pd_spec.model.drafters import load_model
    if not a.device.startswith('cuda'): torch.set_num_threads(1)  # tiny matrices on a CPU: one thread is fastest
    ks = [int(x) for x in a.ks.split(',')]
    dtype = dict(float32=torch.float32, float64=torch.float64, bfloat16=torch.bfloat16)[a.dtype]
    model = load_model(a.model, dtype, device=a.device)
    G.warm_profiler(a.device)  # the profiler's start-up stays out of the first arm's window
    pool = [p[:a.prompt_len] for p in prompt_pool(a.model, a.prompts_file)]
    prompts, warm = pool[:a.num_prompts], pool[a.num_prompts:2 * a.num_prompts]
    run = dict(device=torch.cuda.get_device_name() if a.device.startswith('cuda') else platform.processor() or 'cpu',
               torch=torch.__version__, model=a.model, dtype=a.dtype, started=time.strftime('%Y-%m-%d %H:%M:%S'),
               args=dict(vars(a), out=Path(a.out).name), complete=False, rows=[])
    out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    for k in ks:
        ref = None
        for name in ['standalone'] + [n for n in ARMS if n != 'standalone']:
            t0 = time.perf_counter()
            row = time_arm(ARMS[name], model, k, prompts, warm, a.max_tokens, a.device, SamplingParams(), a.profile_steps)
            ref = row['outputs'] if name == 'standalone' else ref
            row['same_outputs_as_standalone'] = row.pop('outputs') == ref
            row['wall_s'] = time.perf_counter() - t0
            run['rows'].append(row)
            out.write_text(json.dumps(run, indent=1))  # after every arm: a run cut short keeps what it measured
            print({x: (round(v, 4) if isinstance(v, float) else v) for x, v in row.items()}, flush=True)
    run['complete'] = True
    out.write_text(json.dumps(run, indent=1))
    print('wrote', out)

if __name__ == '__main__': main()
