"CUDA graphs for the decode step: the captured step gives the eager step's tokens; on CPU the same step functions run uncaptured."
import functools, torch, pytest
from dataclasses import replace
from vllm_pd_spec.config import SchedulerConfig, RunnerConfig, SamplingParams
from vllm_pd_spec.engine.llm_engine import LLMEngine, make_config
from vllm_pd_spec.engine.runner import ModelRunner
from vllm_pd_spec.engine.cudagraph_utils import capture_sizes
from vllm_pd_spec.experiments import backoff as X
from vllm_pd_spec.experiments.common import torch_threads
from vllm_pd_spec.model.drafters import load_model, model_prompts

@pytest.fixture(autouse=True)
def one_thread():
    with torch_threads(1): yield

@functools.lru_cache(None)
def model(name, dtype=torch.float64, device='cpu'): return load_model(name, dtype, device=device)

def counting(monkeypatch)->list:
    "Count the steps that take the captured path (a test that never took it would prove nothing)."
    calls, run = [], ModelRunner._execute_uniform_decode
    def counted(self, scheduler_output): calls.append(len(scheduler_output.num_scheduled_tokens)); return run(self, scheduler_output)
    monkeypatch.setattr(ModelRunner, '_execute_uniform_decode', counted)
    return calls

def test_capture_sizes():
    "vLLM's default sizes in tokens, rounded up to multiples of 1 + k, no more rows than `max_num_seqs`; bad sizes refused."
    assert capture_sizes(16, 4) == [4, 8, 16, 24, 32, 40, 48, 56, 64]
    assert capture_sizes(1, 1) == [1] and capture_sizes(64, 4)[-1] == 256 and capture_sizes(200, 4)[-1] == 512
    with pytest.raises(ValueError, match='cudagraph_capture_sizes'): capture_sizes(4, 4, [0])

def test_cpu_default_has_no_graphs():
    "On CPU the runner never takes the captured path and keeps no spare slot: the CPU path is unchanged."
    eng = LLMEngine(make_config('mtp', 3, model=model('text-attn')), model('text-attn'), dtype=torch.float64)
    assert eng.runner.cudagraph_manager is None and eng.runner.cache.state == {} and eng.runner.draft_tokens.shape[0] == eng.runner.pad_slot

@pytest.mark.parametrize('arm,name,method,temperature', [('backoff', 'text-hybrid', 'mtp', 0.0), ('reset on add', 'text-attn', 'mtp', 0.0),
                                                         ('legacy', 'text-attn', 'mtp', 0.0), ('standalone', 'text-hybrid', 'mtp', 0.8),
                                                         ('backoff+handoff', 'text-attn', 'mtp', 0.0), ('standalone', 'text-hybrid', 'eagle', 0.0),
                                                         ('standalone', 'text-hybrid', 'dflash', 0.0)])
def test_step_functions_equal_eager_cpu(arm, name, method, temperature, monkeypatch):
    "The captured step's functions, run uncaptured on CPU in float64: outputs, acceptance, the fix-2 census and stale re-prefills equal eager's."
    prompts, got = model_prompts(name, 4, 20), {}
    for graphs in (False, True):
        switches = dict(paged_attention='gather', eager_graph_steps=graphs)  # the captured step reads every row's attention at once
        calls = counting(monkeypatch)
        with torch.no_grad():
            if method == 'dflash':
                eng = LLMEngine(make_config('dflash', 3, model=model(name), scheduler_config=SchedulerConfig(max_num_batched_tokens=256),
                                            runner_config=RunnerConfig(**switches)), model(name), dtype=torch.float64)
                got[graphs] = (eng.generate(prompts, max_tokens=8), eng.spec_stats.num_accepted_tokens_per_pos)
            else:
                a = replace(X.ARMS[arm], runner=X.ARMS[arm].runner | switches)
                run = X.serve_arm(a, model(name), 3, prompts, max_tokens=8, max_num_seqs=4, method=method, sampling=SamplingParams(temperature, 1))
                got[graphs] = (run['outputs'], run['stats'].num_accepted_tokens_per_pos, run['stale'],
                               None if method == 'dflash' else X.taint(run, model(name), prompts, 3))
        assert bool(calls) == graphs
    assert got[True] == got[False]

@pytest.mark.gpu
@pytest.mark.parametrize('name', ['text-attn', 'text-hybrid'])
@pytest.mark.parametrize('method,batch', [('mtp', 1), ('mtp', 16), ('mtp', 64), ('eagle', 16), ('dflash', 16)])
def test_graphs_equal_eager_cuda(name, method, batch, monkeypatch):
    "On CUDA in float32: the steps that replay graphs give `enforce_eager`'s tokens and acceptance, and some steps do replay."
    m, got = model(name, torch.float32, 'cuda'), {}
    for eager in (True, False):
        calls = counting(monkeypatch)
        eng = LLMEngine(make_config(method, 3, model=m, scheduler_config=SchedulerConfig(max_num_batched_tokens=max(256, 24 * batch), max_num_seqs=batch),
                                    runner_config=RunnerConfig(enforce_eager=eager)), m, device='cuda', dtype=torch.float32)
        with torch.no_grad(): got[eager] = (eng.generate(model_prompts(name, batch, 24), max_tokens=16), eng.spec_stats.num_accepted_tokens_per_pos)
        assert bool(calls) != eager and (eng.runner.cudagraph_manager is not None and bool(eng.runner.cudagraph_manager.graphs)) != eager
    assert got[True] == got[False]
