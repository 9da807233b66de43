"The batched drafter pass: the same outputs, acceptance and fix-2 census as the per-request path, with k MTP forwards per engine step."
import functools, torch, pytest
from dataclasses import replace
from vllm_pd_spec.config import SchedulerConfig, RunnerConfig
from vllm_pd_spec.engine.llm_engine import LLMEngine, StepObserver, make_config
from vllm_pd_spec.experiments import backoff as X
from vllm_pd_spec.experiments.common import torch_threads
from vllm_pd_spec.model.drafters import load_model, model_prompts

@pytest.fixture(autouse=True)
def one_thread():
    with torch_threads(1): yield

@functools.lru_cache(None)
def model(name='text-attn'): return load_model(name, torch.float64)

def serve(arm, batched, name='text-attn', k=3, method='mtp'):
    "One fix-2 arm on four prompts of 20 tokens, both engines drafting batched or per request."
    prompts, arm = model_prompts(name, 4, 20), X.ARMS[arm]
    arm = replace(arm, runner=arm.runner | dict(batched_drafter=batched))
    with torch.no_grad(): run = X.serve_arm(arm, model(name), k, prompts, max_tokens=8, max_num_seqs=4, method=method)
    return run, X.taint(run, model(name), prompts, k)

@pytest.mark.parametrize('arm,name,method', [('legacy', 'text-attn', 'mtp'), ('backoff', 'text-attn', 'mtp'), ('reset on add', 'text-attn', 'mtp'),
                                             ('backoff+handoff', 'text-attn', 'mtp'), ('backoff', 'text-hybrid', 'mtp'),
                                             ('legacy', 'text-hybrid', 'eagle'), ('handoff', 'text-attn', 'eagle')])
def test_batched_equals_per_request_fix2(arm, name, method):
    "Outputs, acceptance per position, the census and the stale re-prefill positions: equal on both paths (float64)."
    (a, ta), (b, tb) = (serve(arm, batched, name, method=method) for batched in (True, False))
    assert a['outputs'] == b['outputs']
    assert a['stats'].num_accepted_tokens_per_pos == b['stats'].num_accepted_tokens_per_pos
    assert ta == tb and a['stale'] == b['stale']
    for req_id in a['kv']: assert torch.allclose(a['kv'][req_id], b['kv'][req_id], rtol=0, atol=1e-12)

@pytest.mark.parametrize('method,per_step', [('mtp', 3), ('eagle', 3), ('dflash', 1)])
def test_drafter_forwards_per_step(method, per_step):
    "A decode batch of 4 requests: the drafter runs `k` times per engine step (DFlash once), not once per request and draft."
    m = model()
    counts = {}
    for batched in (True, False):
        eng = LLMEngine(make_config(method, 3, model=m, scheduler_config=SchedulerConfig(max_num_batched_tokens=256),
                                    runner_config=RunnerConfig(batched_drafter=batched)), m, dtype=torch.float64)
        calls, steps, start = [], [], []
        hook = {'mtp': m.mtp, 'eagle': m.eagle, 'dflash': m.dflash}[method].register_forward_pre_hook(lambda *_: calls.append(1))
        eng.add_observer(StepObserver(before_execute=lambda scheduler_output: start.append(len(calls)),
                                      after_execute=lambda scheduler_output, model_runner_output: steps.append(
                                          (len(scheduler_output.num_scheduled_tokens), len(calls) - start[-1]))))
        try: outs = eng.generate(model_prompts('text-attn', 4, 16), max_tokens=8)
        finally: hook.remove()
        counts[batched] = (outs, steps)
    (outs, steps), (outs_ref, steps_ref) = counts[True], counts[False]
    assert outs == outs_ref
    assert max(n for _, n in steps) == per_step and any(rows == 4 for rows, _ in steps)
    assert any(n == 4 * per_step for rows, n in steps_ref if rows == 4)  # the per-request path: one pass per row

@pytest.mark.parametrize('method', ['mtp', 'dflash'])
def test_gathered_attention_equals_row_loop(method):
    "The attention that reads every row at once (the CUDA default) gives the row loop's tokens, causal (MTP) and block (DFlash)."
    m, outs = model('text-hybrid'), {}
    for backend in ('rows', 'gather'):
        eng = LLMEngine(make_config(method, 3, model=m, scheduler_config=SchedulerConfig(max_num_batched_tokens=40),
                                    runner_config=RunnerConfig(paged_attention=backend)), m, dtype=torch.float64)
        assert eng.runner.cache.paged_attention == backend
        with torch.no_grad(): outs[backend] = (eng.generate(model_prompts('text-hybrid', 3, 24), max_tokens=8), eng.spec_stats.num_accepted_tokens_per_pos)
    assert outs['rows'] == outs['gather']

@pytest.mark.gpu
@pytest.mark.parametrize('method', ['mtp', 'eagle', 'dflash'])
def test_cuda_paths_equal(method):
    "On CUDA in float64: the batched drafter with gathered attention gives the per-request row loop's tokens and acceptance."
    m, outs = load_model('text-hybrid', torch.float64, device='cuda'), {}
    for batched, backend in ((True, 'gather'), (False, 'rows')):
        eng = LLMEngine(make_config(method, 3, model=m, scheduler_config=SchedulerConfig(max_num_batched_tokens=64),
                                    runner_config=RunnerConfig(batched_drafter=batched, paged_attention=backend)), m,
                        device='cuda', dtype=torch.float64)
        with torch.no_grad(): outs[batched] = (eng.generate(model_prompts('text-hybrid', 8, 32), max_tokens=12), eng.spec_stats.num_accepted_tokens_per_pos)
    assert outs[True] == outs[False]
