"""Fix 2's arms timed on one GPU: the P/D pair (both engines on the same device) and standalone, TPOT and output tokens/s.

    PYTHONPATH=. python3 tools/fix2_gpu.py                                              # on an H200: writes nbs/runs/fix2_gpu.json
    PYTHONPATH=. python3 tools/fix2_gpu.py --device cpu --dry-run --out /tmp/fix2_gpu_dry.json --standins  # CPU, tiny

It needs torch only (numpy and triton may be there too). Where fastcore, safetensors or tokenizers are missing it uses
small stand-ins of its own (`use_standins`): fastcore's `patch`, a safetensors reader, and the held-out prompts
tokenized in advance (tools/fix2_gpu_prompts.json, written by `--write-prompts` where `tokenizers` is installed).
`--standins` forces them, so that a CPU dry run takes the path a bare GPU machine takes.

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
import argparse, functools, importlib.util, json, platform, statistics, struct, sys, time, types
from pathlib import Path
import torch

PROMPTS = Path(__file__).with_name('fix2_gpu_prompts.json')  # the held-out prompts, tokenized in advance
POOL = dict(n=32, prompt_len=256)  # model_prompts(model, 32, 256): requests are the first --num-prompts, warm-up the next ones

def _patch(f=None, *, as_prop=False, cls_method=False):
    "fastcore's `patch`, as the engine uses it: add `f` to the class its first argument is annotated with."
    if f is None: return functools.partial(_patch, as_prop=as_prop, cls_method=cls_method)
    cls = next(iter(f.__annotations__.values()))
    for c in getattr(cls, '__args__', None) or (cls,):
        setattr(c, f.__name__, property(f) if as_prop else classmethod(f) if cls_method else f)
    return f

_DTYPES = dict(F64=torch.float64, F32=torch.float32, F16=torch.float16, BF16=torch.bfloat16, I64=torch.int64, I32=torch.int32,
               I16=torch.int16, I8=torch.int8, U8=torch.uint8, BOOL=torch.bool)

def _read_safetensors(path)->tuple:
    "`(tensors, metadata)` of a safetensors file: an 8-byte header length, a JSON header, then the raw data."
    b = Path(path).read_bytes()
    n = struct.unpack('<Q', b[:8])[0]
    header = json.loads(b[8:8 + n]); meta = header.pop('__metadata__', {}) or {}
    data = bytearray(b[8 + n:])
    out = {k: torch.frombuffer(data, dtype=_DTYPES[v['dtype']], count=(v['data_offsets'][1] - v['data_offsets'][0]) // _DTYPES[v['dtype']].itemsize,
                               offset=v['data_offsets'][0]).reshape(v['shape']) if v['data_offsets'][1] > v['data_offsets'][0]
           else torch.empty(v['shape'], dtype=_DTYPES[v['dtype']]) for k, v in header.items()}
    return out, meta

class _SafeOpen:
    "safetensors' `safe_open`, as `load_model` uses it (a context manager with `metadata()`)."
    def __init__(self, path, framework='pt', device='cpu'): self.tensors, self.meta = _read_safetensors(path)
    def __enter__(self): return self
    def __exit__(self, *exc): return False
    def metadata(self): return self.meta
    def keys(self): return list(self.tensors)
    def get_tensor(self, k): return self.tensors[k]

def use_standins(force:bool=False)->list:
    "Register stand-ins for fastcore and safetensors where they are missing (or `force`); the names of those registered."
    used = []
    if force or importlib.util.find_spec('fastcore') is None:
        fc, basics = types.ModuleType('fastcore'), types.ModuleType('fastcore.basics')
        basics.patch, fc.basics = _patch, basics
        sys.modules.update({'fastcore': fc, 'fastcore.basics': basics}); used.append('fastcore')
    if force or importlib.util.find_spec('safetensors') is None:
        st, stt = types.ModuleType('safetensors'), types.ModuleType('safetensors.torch')
        st.safe_open, stt.load_file, st.torch = _SafeOpen, lambda path, device='cpu': _read_safetensors(path)[0], stt
        sys.modules.update({'safetensors': st, 'safetensors.torch': stt}); used.append('safetensors')
    return used

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

def _engine_imports():
    "The engine's names, imported after the stand-ins are in place."
    global SchedulerConfig, CacheConfig, cdiv, LLMEngine, PDPair, make_config, SamplingParams, ARMS, use_backoff, load_model
    from vllm_pd_spec.config import SchedulerConfig, CacheConfig, cdiv
    from vllm_pd_spec.engine.llm_engine import LLMEngine, PDPair, make_config
    from vllm_pd_spec.engine.runner import SamplingParams
    from vllm_pd_spec.experiments.backoff import ARMS, use_backoff
    from vllm_pd_spec.model.drafters import load_model

def sync(device):
    if str(device).startswith('cuda'): torch.cuda.synchronize()

class StepTimer:
    "Wall time of each step of one engine (synchronised), the tokens each request got in it, and the time in `schedule()` and `execute_model`."
    def __init__(self, engine, device):
        self.device, self.steps, self.schedule_s, self.execute_s = device, [], [], []
        step, schedule, execute = engine.step, engine.scheduler.schedule, engine.runner.execute_model
        def timed(fn, into):
            def call(*a):
                sync(device); t = time.perf_counter(); out = fn(*a); sync(device); into.append(time.perf_counter() - t); return out
            return call
        durations = []
        def timed_step():
            outs = timed(step, durations)()
            self.steps.append((durations[-1], {o.request_id: len(o.new_token_ids) for o in outs if o.new_token_ids}))
            return outs
        # this tool's instrumentation only: the instance's methods are wrapped, the engine is unchanged
        engine.step, engine.scheduler.schedule, engine.runner.execute_model = timed_step, timed(schedule, self.schedule_s), timed(execute, self.execute_s)

def build(arm, model, k, n_prompts, prompt_len, max_tokens, device, sampling):
    "The arm's engine(s) and its decoding engine."
    sched = SchedulerConfig(max_num_batched_tokens=max(512, prompt_len * 2), max_num_seqs=n_prompts)
    groups = 1 + any(kind == 'gdn' for kind in model.args.layer_kinds)
    blocks = groups * n_prompts * (cdiv(prompt_len + max_tokens + 2 * k + 2, 16) + 1) + 2
    kw = dict(device=device, dtype=next(model.parameters()).dtype, handoff=arm.handoff)
    if arm.pd:
        pair = PDPair('mtp', k, arm.fixes, model, scheduler_config=sched, cache_config=CacheConfig(num_gpu_blocks=blocks), **kw)
        if arm.backoff is not None:
            for e in (pair.P, pair.D): use_backoff(e, arm.backoff)
        engines, engine, decoder = (pair.P, pair.D), pair, pair.D
    else:
        engine = decoder = LLMEngine(make_config('mtp', k, fixes=arm.fixes, model=model, scheduler_config=sched,
                                                 cache_config=CacheConfig(num_gpu_blocks=blocks)), model, **kw)
        engines = (engine,)
    for e in engines: e.runner.sampling, e.runner.reprefill_state = sampling, arm.reprefill_state
    return engine, decoder

def profile_steps(decoder, engine_step, n_steps:int, device)->dict:
    "GPU busy time, kernel launches and host operator calls over `n_steps` decoding steps (torch.profiler), against their wall time."
    from torch.profiler import profile, ProfilerActivity
    cuda = str(device).startswith('cuda')
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync(device); t = time.perf_counter()
    with profile(activities=acts) as prof:
        for _ in range(n_steps): engine_step()
        sync(device)
    wall = time.perf_counter() - t
    avg = prof.key_averages()
    gpu_us = sum(getattr(e, 'self_device_time_total', getattr(e, 'self_cuda_time_total', 0)) for e in avg) if cuda else 0
    launches = sum(e.count for e in avg if 'LaunchKernel' in e.key)
    aten = sum(e.count for e in avg if e.key.startswith('aten::'))
    return dict(profiled_steps=n_steps, profiled_wall_s=wall, gpu_busy_s=gpu_us / 1e6 if cuda else None,
                gpu_busy_share=gpu_us / 1e6 / max(wall, 1e-9) if cuda else None,
                kernel_launches_per_step=launches / n_steps if cuda else None, aten_calls_per_step=aten / n_steps)

def time_arm(arm, model, k, prompts, warm, max_tokens, device, sampling, profile_window):
    "One warm-up run, then one timed run of the arm; its timings and outputs."
    engine, decoder = build(arm, model, k, len(warm), len(warm[0]), max_tokens, device, sampling)
    engine.generate(warm, max_tokens=max_tokens)                     # warm-up: allocator, kernels, caches
    engine, decoder = build(arm, model, k, len(prompts), len(prompts[0]), max_tokens, device, sampling)
    timer = StepTimer(decoder, device)
    if str(device).startswith('cuda'): torch.cuda.reset_peak_memory_stats()
    outputs = engine.generate(prompts, max_tokens=max_tokens)
    # per request: the steps after its first token
    first, dur, toks = {}, {}, {}
    for i, (s, got) in enumerate(timer.steps):
        for rid, n in got.items():
            if rid not in first: first[rid] = i; toks[rid] = n - 1; dur[rid] = 0.0
            else: toks[rid] += n; dur[rid] += s
    tpot = [dur[r] / toks[r] for r in first if toks[r] > 0]
    decode_s = sum(s for s, _ in timer.steps)
    n_out = sum(len(o) for o in outputs)
    st = decoder.spec_stats
    # what bounds the step: a profiled window of decoding steps on a fresh run
    engine2, decoder2 = build(arm, model, k, len(prompts), len(prompts[0]), max_tokens, device, sampling)
    try:  # run until the decoder decodes every request, then profile its steps
        step = next(_stepper_pd(engine2, prompts, max_tokens) if arm.pd else _stepper_standalone(engine2, prompts, max_tokens))
        bound = profile_steps(decoder2, step, profile_window, device)
    except StopIteration: bound = dict(profiled_steps=0, note='the run ended before the profiled window')
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

def _stepper_standalone(engine, prompts, max_tokens):
    "Add the prompts, run until every request has a token, then yield the engine's step function."
    from vllm_pd_spec.engine.request import Request
    for i, p in enumerate(prompts): engine.add_request(Request(f'req-{i}', p, max_tokens=max_tokens))
    while engine.has_work() and any(not engine.outputs.get(f'req-{i}') for i in range(len(prompts))): engine.step()
    if not engine.has_work(): return
    yield engine.step

def _stepper_pd(pair, prompts, max_tokens):
    "The proxy's loop until D decodes every request, then yield D's step function."
    from vllm_pd_spec.engine.request import Request
    from vllm_pd_spec.config import make_kv_transfer_params
    for i, p in enumerate(prompts):
        pair.P.add_request(Request(f'req-{i}', p, max_tokens=1, kv_transfer_params=make_kv_transfer_params(do_remote_decode=True)))
    sent = set()
    for _ in range(10_000):
        for o in pair.P.step():
            if o.finish_reason is not None and o.request_id not in sent:
                sent.add(o.request_id)
                pair.D.add_request(Request(o.request_id, prompts[int(o.request_id.split('-')[1])], max_tokens=max_tokens,
                                           kv_transfer_params=dict(o.kv_transfer_params or {})))
        pair.D.step()
        if len(sent) == len(prompts) and all(pair.D.outputs.get(f'req-{i}') for i in range(len(prompts))): break
    if not pair.D.has_work(): return
    yield pair.D.step

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
    ap.add_argument('--standins', action='store_true', help="use this tool's stand-ins for fastcore, safetensors and tokenizers")
    ap.add_argument('--write-prompts', action='store_true', help=f'write {PROMPTS.name} (needs tokenizers) and exit')
    a = ap.parse_args(argv)
    if a.write_prompts:
        PROMPTS.write_text(json.dumps(dict(POOL, prompts=prompt_pool('text-attn'))) + '\n'); print('wrote', PROMPTS); return
    if a.device.startswith('cuda') and not torch.cuda.is_available(): sys.exit('--device cuda: torch sees no CUDA device')
    if a.dry_run: a.ks, a.num_prompts, a.prompt_len, a.max_tokens, a.profile_steps = '2', 2, 32, 8, 2
    if not 1 <= a.num_prompts <= POOL['n'] // 2: sys.exit(f'--num-prompts={a.num_prompts}: must be in 1..{POOL["n"] // 2}')
    if not 1 <= a.prompt_len <= POOL['prompt_len']: sys.exit(f'--prompt-len={a.prompt_len}: must be in 1..{POOL["prompt_len"]}')
    standins = use_standins(a.standins)
    _engine_imports()
    if not a.device.startswith('cuda'): torch.set_num_threads(1)  # tiny matrices on a CPU: one thread is fastest
    ks = [int(x) for x in a.ks.split(',')]
    dtype = dict(float32=torch.float32, float64=torch.float64, bfloat16=torch.bfloat16)[a.dtype]
    model = load_model(a.model, dtype, device=a.device)
    pool = [p[:a.prompt_len] for p in prompt_pool(a.model, a.standins)]
    prompts, warm = pool[:a.num_prompts], pool[a.num_prompts:2 * a.num_prompts]
    run = dict(device=torch.cuda.get_device_name() if a.device.startswith('cuda') else platform.processor() or 'cpu',
               torch=torch.__version__, model=a.model, dtype=a.dtype, started=time.strftime('%Y-%m-%d %H:%M:%S'),
               standins=standins, args=dict(vars(a), out=Path(a.out).name), complete=False, rows=[])
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
