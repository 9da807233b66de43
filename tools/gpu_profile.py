"""Timing and profiling of one engine's steps on one device: what `tools/engine_bench.py` and `tools/fix2_gpu.py` measure with.

* `StepTimer`: a step observer (the engine's `on_step_start`, `on_schedule`, `before_execute`, `after_execute` and
  `on_output` hooks): the wall time of each step (synchronised), the tokens each request got in it, and the time in
  `schedule()` and `execute_model`;
* `tpots`: per-request TPOT from the timed steps;
* `profile_steps` (and `profile_stats`, for a window profiled elsewhere): over a window of steps, torch.profiler's GPU busy time, kernel launches outside CUDA-graph replays
  (`cudaLaunchKernel` and its variants), graph replays (`cudaGraphLaunch`) and aten calls;
* `build`: a standalone MTP engine sized for the prompts (greedy), and `decoding`: run it until every request decodes.

Needs torch and the package (fastcore from a wheel where the machine lacks it); nothing from the other tools.
"""
import statistics, time
import torch

def sync(device):
    "Wait for the device's queued work (a no-op on the CPU)."
    if str(device).startswith('cuda'): torch.cuda.synchronize()

def tpots(steps:list)->tuple:
    "Per-request TPOT in seconds from `[(step seconds, {request: new tokens})]` (the steps after its first token, over its tokens after the first), and each request's first step."
    first, dur, toks = {}, {}, {}
    for i, (s, got) in enumerate(steps):
        for rid, n in got.items():
            if rid not in first: first[rid], toks[rid], dur[rid] = i, n - 1, 0.0
            else: toks[rid] += n; dur[rid] += s
    return [dur[r] / toks[r] for r in first if toks[r] > 0], first

class StepTimer:
    "A step observer (give it to `engine.add_observer`): wall time of each step of one engine (synchronised), the tokens each request got in it, and the time in `schedule()` and `execute_model`."
    def __init__(self, device):
        self.device, self.steps, self.schedule_s, self.execute_s = device, [], [], []

    def _now(self)->float: sync(self.device); return time.perf_counter()
    def on_step_start(self): self.t_step = self._now()
    def on_schedule(self, scheduler_output): self.schedule_s.append(self._now() - self.t_step)
    def before_execute(self, scheduler_output): self.t_execute = self._now()
    def after_execute(self, scheduler_output, model_runner_output): self.execute_s.append(self._now() - self.t_execute)
    def on_output(self, scheduler_output, model_runner_output, outputs):
        "The step ends: its wall time since it began, and each request's new tokens."
        self.steps.append((self._now() - self.t_step, {o.request_id: len(o.new_token_ids) for o in outputs if o.new_token_ids}))

    def summary(self, n_requests:int)->dict:
        "Step time, decode-step time (steps after every request's first token in which all of them got tokens), TPOT, tokens/s."
        tpot, first = tpots(self.steps)
        steps = [s for s, _ in self.steps]
        start = max(first.values(), default=0)
        decode = [s for i, (s, got) in enumerate(self.steps) if i > start and len(got) == n_requests]
        n_out, total = sum(sum(got.values()) for _, got in self.steps), max(sum(steps), 1e-9)
        return dict(steps=len(steps), step_ms_median=1e3 * statistics.median(steps),
                    decode_steps=len(decode), decode_step_ms_median=1e3 * statistics.median(decode) if decode else None,
                    tpot_ms_median=1e3 * statistics.median(tpot) if tpot else None, output_tokens_per_s=n_out / total,
                    execute_share=sum(self.execute_s) / total, schedule_share=sum(self.schedule_s) / total)

def warm_profiler(device):
    "Start and stop torch.profiler once on a small matmul, so that the first measured window does not pay the profiler's start-up (seconds with CUDA)."
    from torch.profiler import profile, ProfilerActivity
    cuda = str(device).startswith('cuda')
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])):
        x = torch.ones(64, 64, device=device); (x @ x).sum().item()

def profile_steps(engine_step, n_steps:int, device)->dict:
    "GPU busy time, kernel launches outside graph replays, graph replays and aten calls over `n_steps` steps (torch.profiler), against their wall time."
    from torch.profiler import profile, ProfilerActivity
    cuda = str(device).startswith('cuda')
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync(device); t = time.perf_counter()
    with profile(activities=acts) as prof:
        for _ in range(n_steps): engine_step()
        sync(device)
    return profile_stats(prof, time.perf_counter() - t, n_steps, cuda)

def profile_stats(prof, # a finished `torch.profiler.profile`
                  wall:float, # the window's wall time, in seconds
                  n_steps:int, # the steps in the window
                  cuda:bool, # whether CUDA activity was recorded
                 )->dict:
    "GPU busy time, kernel launches outside graph replays, graph replays and aten calls per step, from a profiled window."
    avg, n = prof.key_averages(), max(n_steps, 1)
    gpu_us = sum(getattr(e, 'self_device_time_total', 0) or getattr(e, 'self_cuda_time_total', 0) for e in avg
                 if getattr(e, 'device_type', None) == torch.autograd.DeviceType.CUDA) if cuda else 0
    count = lambda pred: sum(e.count for e in avg if pred(e.key))
    return dict(profiled_steps=n_steps, profiled_wall_s=wall, gpu_busy_s=gpu_us / 1e6 if cuda else None,
                gpu_busy_share=gpu_us / 1e6 / max(wall, 1e-9) if cuda else None,
                kernel_launches_per_step=count(lambda k: 'LaunchKernel' in k) / n if cuda else None,
                graph_replays_per_step=count(lambda k: 'GraphLaunch' in k) / n if cuda else None,
                aten_calls_per_step=count(lambda k: k.startswith('aten::')) / n)

def build(model, k:int, n_prompts:int, prompt_len:int, max_tokens:int, device, runner_config=None):
    "A standalone MTP engine (greedy, fixed 0.33.0; `runner_config`: the runner's switches) with a block pool and batch budget sized for `n_prompts` prompts (all prefilled in one step, so all decode together)."
    from vllm_pd_spec.config import SchedulerConfig, CacheConfig, RunnerConfig, cdiv
    from vllm_pd_spec.engine.llm_engine import LLMEngine, make_config
    sched = SchedulerConfig(max_num_batched_tokens=max(512, n_prompts * prompt_len), max_num_seqs=n_prompts)  # every prompt in one step
    groups = 1 + any(kind == 'gdn' for kind in model.args.layer_kinds)
    blocks = groups * n_prompts * (cdiv(prompt_len + max_tokens + 2 * k + 2, 16) + 1) + 2
    return LLMEngine(make_config('mtp', k, model=model, scheduler_config=sched, cache_config=CacheConfig(num_gpu_blocks=blocks),
                                 runner_config=runner_config or RunnerConfig()), model, device=device, dtype=next(model.parameters()).dtype)

def decoding(engine, prompts:list, max_tokens:int)->bool:
    "Add the prompts and step until every request has its first token; whether decode steps are left to profile."
    from vllm_pd_spec.engine.request import Request
    ids = [f'prof-{i}' for i in range(len(prompts))]
    for rid, p in zip(ids, prompts): engine.add_request(Request(rid, p, max_tokens=max_tokens))
    while engine.has_work() and any(not engine.outputs.get(rid) for rid in ids): engine.step()
    return engine.has_work()
