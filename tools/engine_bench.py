"""The engine's decode step on one device: the per-request path, the batched step eager, and the batched step in CUDA graphs, in the same run.

    PYTHONPATH=. python3 tools/engine_bench.py                    # on a GPU: writes nbs/runs/engine_bench.json
    PYTHONPATH=. python3 tools/engine_bench.py --device cpu --dry-run --out /tmp/engine_bench_dry.json

Standalone engine, MTP with k = 3, greedy. Per model (text-attn, text-hybrid), dtype (float32, bfloat16), batch (1, 16,
64 requests in flight, each a 64-token held-out prompt) and path:
* `per-request`: one drafter pass per request and the attention's loop over rows (`RunnerConfig(batched_drafter=False,
  paged_attention='rows')`), the path before batching;
* `batched`: one drafter pass per engine step over every row and, on CUDA, the attention that reads every row at once;
  decode steps eager (CUDA graphs off);
* `graphs`: the same with the decode step replayed from captured CUDA graphs (where the engine has them and the device
  is CUDA).
On one engine per row: a warm-up run on other prompts (the graph path captures its sizes there), one timed run (step
time, decode-step time, TPOT, output tokens/s, MTP forwards per step, a replayed MTP pass counting its k captured
modules), then a profiled window of decode steps of the same prompts again (kernel launches per step outside graph
replays, graph replays, GPU busy share; torch.profiler). Outputs are compared with the batched path's (equal tokens expected in float32;
bfloat16 may differ where two logits tie after rounding). The per-request path, the slow one, runs fewer tokens
(`--slow-max-tokens`): its step time does not depend on them. Writes one JSON file after every row, so a run cut short
keeps what it measured. Timing and profiling: `tools/gpu_profile.py`.
"""
import argparse, importlib.util, json, platform, sys, time
from pathlib import Path
import torch

_spec = importlib.util.spec_from_file_location('gpu_profile', Path(__file__).with_name('gpu_profile.py'))
G = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(G)

PATHS = ('batched', 'graphs', 'per-request')

def path_config(path:str, # one of `PATHS`
                eager_graph_steps:bool=False, # the graph path's functions run uncaptured (a CPU dry run)
               ):
    "The runner's switches for `path`: the config the path's engines are built with."
    from vllm_pd_spec.config import RunnerConfig
    return RunnerConfig(batched_drafter=path != 'per-request', enforce_eager=path != 'graphs', eager_graph_steps=eager_graph_steps,
                        paged_attention=dict(batched=None, graphs='gather').get(path, 'rows'))  # None: 'gather' on CUDA; the graphs replay gathered attention

class DrafterForwards:
    "A step observer counting the MTP drafter's forwards in each step of `runner`'s engine: eager ones by a forward hook, replayed ones as k per graph replay."
    def __init__(self, runner):
        self.runner, self.calls, self.per_step = runner, [], []
        self.hook = runner.model.mtp.register_forward_pre_hook(lambda *_: self.calls.append(1))  # the runner's copy of the weights
    def _count(self)->int:
        manager = self.runner.cudagraph_manager  # a replayed MTP pass runs its k captured modules (uncaptured, the hook counts them)
        graphs = manager.graphs.values() if manager is not None else ()
        return len(self.calls) + sum(g.k * g.num_drafter_replays for g in graphs)
    def on_schedule(self, scheduler_output): pass
    def before_execute(self, scheduler_output): self.start = self._count()
    def after_execute(self, scheduler_output, model_runner_output): self.per_step.append(self._count() - self.start)
    def on_output(self, scheduler_output, model_runner_output, outputs): pass

def prompts_for(model:str, n:int, prompt_len:int)->list:
    "`n` prompts of `prompt_len` tokens cut from 32 held-out prompts of 256 tokens."
    from vllm_pd_spec.model.drafters import model_prompts
    cut = [p[i:i + prompt_len] for p in model_prompts(model, 32, 256) for i in range(0, 256 - prompt_len + 1, prompt_len)]
    if len(cut) < n: sys.exit(f'{n} prompts of {prompt_len} tokens: the pool gives {len(cut)}')
    return cut[:n]

def bench_row(model, path:str, prompts, warm, k, max_tokens, device, profile_window, eager_graph_steps:bool=False)->dict:
    "One path at one batch size on one engine: a warm-up run (graphs captured), a timed run, then a profiled window of decode steps."
    engine = G.build(model, k, len(prompts), len(prompts[0]), max_tokens, device, path_config(path, eager_graph_steps))
    engine.generate(warm, max_tokens=max_tokens)  # warm-up: allocator, kernels and, on the graph path, the captures of these sizes
    forwards, timer = engine.add_observer(DrafterForwards(engine.runner)), engine.add_observer(G.StepTimer(device))
    try: outputs = engine.generate(prompts, max_tokens=max_tokens)
    finally: forwards.hook.remove()
    per_step = forwards.per_step
    timing = timer.summary(len(prompts))
    try: bound = G.profile_steps(engine.step, profile_window, device) if G.decoding(engine, prompts, max_tokens) else \
                 dict(profiled_steps=0, note='the run ended before the profiled window')
    except Exception as e: bound = dict(profiled_steps=0, note=f'the profiler failed: {type(e).__name__}: {e}')
    graphs = len(engine.runner.cudagraph_manager.graphs) if engine.runner.cudagraph_manager is not None else 0
    return dict(path=path, batched_drafter=path != 'per-request', attention='rows' if path == 'per-request' else 'default',
                cuda_graphs=path == 'graphs', captured_sizes=graphs, batch=len(prompts), k=k, max_tokens=max_tokens,
                output_tokens=sum(len(o) for o in outputs), **timing, drafter_forwards_per_step_max=max(per_step, default=0),
                **bound, outputs=outputs)

def check_paths(device:str, n:int=8, max_tokens:int=12, methods=('mtp', 'eagle', 'dflash'), eager_graph_steps:bool=False)->dict:
    "Float64 on `device`, text-hybrid, per method: every path's tokens and acceptance equal the per-request path's."
    from vllm_pd_spec.config import SchedulerConfig
    from vllm_pd_spec.engine.llm_engine import LLMEngine, make_config
    from vllm_pd_spec.model.drafters import load_model
    m, prompts, got = load_model('text-hybrid', torch.float64, device=device), prompts_for('text-hybrid', n, 32), {}
    paths = [p for p in PATHS if p != 'graphs' or device.startswith('cuda')]
    for method in methods:
        outs = {}
        for path in paths:
            eng = LLMEngine(make_config(method, 3, model=m, scheduler_config=SchedulerConfig(max_num_batched_tokens=64),
                                        runner_config=path_config(path, eager_graph_steps)), m, device=device, dtype=torch.float64)
            with torch.no_grad(): outs[path] = (eng.generate(prompts, max_tokens=max_tokens), eng.spec_stats.num_accepted_tokens_per_pos)
        got[method] = {p: outs[p] == outs['per-request'] for p in paths if p != 'per-request'}
    return got

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default='nbs/runs/engine_bench.json')
    ap.add_argument('--device', default='cuda')
    ap.add_argument('--models', default='text-attn,text-hybrid')
    ap.add_argument('--dtypes', default='float32,bfloat16')
    ap.add_argument('--batches', default='1,16,64')
    ap.add_argument('--paths', default=','.join(PATHS))
    ap.add_argument('--k', type=int, default=3)
    ap.add_argument('--prompt-len', type=int, default=64)
    ap.add_argument('--max-tokens', type=int, default=32)
    ap.add_argument('--slow-max-tokens', type=int, default=12, help='max tokens of the per-request path')
    ap.add_argument('--profile-steps', type=int, default=4)
    ap.add_argument('--budget-s', type=float, default=330, help='stop starting new rows after this many seconds')
    ap.add_argument('--dry-run', action='store_true', help='tiny: text-attn, float32, batch 1 and 2, 16-token prompts, 6 tokens; the float64 check on MTP only')
    a = ap.parse_args(argv)
    if a.device.startswith('cuda') and not torch.cuda.is_available(): sys.exit('--device cuda: torch sees no CUDA device')
    if a.dry_run: a.models, a.dtypes, a.batches, a.prompt_len, a.max_tokens, a.slow_max_tokens, a.profile_steps = 'text-attn', 'float32', '1,2', 16, 6, 6, 2
    from vllm_pd_spec.model.drafters import load_model
    if not a.device.startswith('cuda'): torch.set_num_threads(1)
    batches, cuda = [int(x) for x in a.batches.split(',')], a.device.startswith('cuda')
    eager_graph_steps = a.dry_run and not cuda  # the graph path's functions run uncaptured (`RunnerConfig.eager_graph_steps`)
    paths = [p for p in a.paths.split(',') if p != 'graphs' or cuda or a.dry_run]
    run = dict(device=torch.cuda.get_device_name() if cuda else platform.processor() or 'cpu', torch=torch.__version__,
               started=time.strftime('%Y-%m-%d %H:%M:%S'), graph_switch='RunnerConfig.enforce_eager',
               args=dict(vars(a), out=Path(a.out).name), paths=paths, complete=False, rows=[])
    out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    G.warm_profiler(a.device)  # the profiler's start-up stays out of the first row's window
    t_start = time.perf_counter()
    run['float64_paths_equal'] = check_paths(a.device, *((2, 4, ('mtp',)) if a.dry_run else ()), eager_graph_steps=eager_graph_steps)
    print('float64, equal tokens and acceptance to the per-request path:', run['float64_paths_equal'], flush=True)
    pools = {name: prompts_for(name, 2 * max(batches), a.prompt_len) for name in a.models.split(',')}
    dtypes = a.dtypes.split(',')
    for dt in dtypes:  # the first dtype for both models first, then batch 16 first: a run cut short by the budget keeps those
        for name, pool in pools.items():
            model = load_model(name, dict(float32=torch.float32, bfloat16=torch.bfloat16)[dt], device=a.device)
            for b in (batches if dt == dtypes[0] else sorted(batches, key=lambda b: (b != 16, b))):
                ref = None
                for path in paths:
                    if time.perf_counter() - t_start > a.budget_s: run['stopped'] = f'budget of {a.budget_s} s spent'; break
                    t0, n = time.perf_counter(), a.slow_max_tokens if path == 'per-request' else a.max_tokens
                    row = bench_row(model, path, pool[:b], pool[b:b + min(b, 2)] if path == 'per-request' else pool[b:2 * b],
                                    a.k, n, a.device, a.profile_steps, eager_graph_steps)
                    outs = row.pop('outputs'); ref = outs if ref is None else ref
                    row.update(model=name, dtype=dt, same_outputs_as_batched=[o[:len(r)] for o, r in zip(ref, outs)] == [r[:len(o)] for o, r in zip(ref, outs)],
                               wall_s=time.perf_counter() - t0)
                    run['rows'].append(row); out.write_text(json.dumps(run, indent=1))
                    print({x: (round(v, 4) if isinstance(v, float) else v) for x, v in row.items()}, flush=True)
    run['complete'], run['seconds'] = 'stopped' not in run, round(time.perf_counter() - t_start, 1)
    out.write_text(json.dumps(run, indent=1))
    print('wrote', out)

if __name__ == '__main__': main()
