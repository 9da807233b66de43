"The experiments' kit: `serve` sizes the block pool so that no request is ever preempted, and refuses a pool too small."
import pytest, torch
from vllm_pd_spec.config import Fixes
from vllm_pd_spec.experiments import common as K
from vllm_pd_spec.model.drafters import load_model

@pytest.fixture(scope='module')
def hybrid():
    "The shipped fixture: GDN and attention layers, so two KV groups draw on one pool."
    return load_model(dtype=torch.float64)

def prompts(n, lo=30, hi=70):
    return [[(7 * i + t) % 31 + 1 for t in range(lo + (i * 13) % (hi - lo))] for i in range(n)]

@pytest.mark.parametrize('arm', [K.Arm('fixed'), K.Arm('legacy', Fixes().off('prefill_backoff', 'lookahead_contract'), 'legacy'),
                                 K.Arm('standalone', role='reference', pd=False)], ids=lambda a: a.name)
def test_the_sized_pool_never_runs_out(hybrid, arm):
    "More requests than run at once, long outputs, drafts: every request finishes with all its tokens and none is preempted."
    ps = prompts(10)
    with K.torch_threads(1):
        s = K.serve(arm, hybrid, ps, k=3, max_tokens=40, max_num_seqs=4)  # raises on a preemption
    assert s.num_blocks == K.pool_blocks(hybrid, ps, 40, 3, 4)
    assert [len(o) for o in s.outputs] == [40] * len(ps)
    for e in s.engines: assert e.scheduler.kv_cache_config.num_blocks == s.num_blocks

def test_a_pool_too_small_is_refused_before_anything_runs(hybrid):
    ps = prompts(4)
    need = K.pool_blocks(hybrid, ps, 16, 2, 8)
    with pytest.raises(ValueError, match=f'num_blocks={need - 1} is invalid: must be at least {need}: .* would be preempted'):
        K.serve(K.Arm('fixed'), hybrid, ps, k=2, max_tokens=16, num_blocks=need - 1)
    with pytest.raises(ValueError, match=r'prompts=\[\] is invalid: must be at least one prompt'): K.pool_blocks(hybrid, [], 16)

def test_a_preemption_is_an_error_not_a_figure(hybrid, monkeypatch):
    "Were the pool sized too small (here: forced), the run would preempt; `serve` says so instead of returning figures."
    ps = prompts(8)
    monkeypatch.setattr(K, 'pool_blocks', lambda *a, **kw: 24)
    with pytest.raises(RuntimeError, match=r'were preempted; the block pool \(24\) is too small'), K.torch_threads(1):
        K.serve(K.Arm('standalone', role='reference', pd=False), hybrid, ps, k=3, max_tokens=40, max_num_seqs=8)

def test_arms_and_observers(hybrid):
    with pytest.raises(ValueError, match="role='best'"): K.Arm('x', role='best')
    with pytest.raises(TypeError, match='an Arm'): K.serve('fixed', hybrid, prompts(1))
    with pytest.raises(ValueError, match="observers=.* is invalid: must be keyed by 'P' and 'D'"): K.serve(K.Arm('fixed'), hybrid, prompts(1), observers={'X': []})

def test_build_gives_serves_engines_not_run():
    "A P/D arm of model-less engines (the toy's): each engine its own pool (D's from the arm), nothing run or watched; driven later, the standalone toy's outputs."
    from functools import partial
    from vllm_pd_spec.engine.kv_cache_manager import get_kv_cache_config
    from vllm_pd_spec.engine.toy_kv_runner import TOY_MODEL, TOY_DRAFTER, ToyKVRunner, run_standalone
    toy = dict(method=None, block_size=TOY_MODEL.block_size, runner=ToyKVRunner, kv_cache_config=partial(get_kv_cache_config, drafter_layer_names=TOY_DRAFTER))
    b = K.build(K.Arm('toy', decode=dict(cache=dict(num_gpu_blocks=24))), TOY_MODEL, 64, **toy)
    assert b.outputs is None and [e.scheduler.kv_cache_config.num_blocks for e in b.engines] == [64, 24]
    assert not any(e.has_work() or e.observers for e in b.engines)
    ps = {'a': [5, 6, 7, 8, 9], 'b': [5, 6, 7, 8, 10, 11]}
    assert b.engine.generate(list(ps.values()), 4) == list(run_standalone(ps, 4).values())
