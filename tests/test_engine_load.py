"Sustained load: a bad request is refused at `add_request` and never kills the engine; nothing is lost or leaked."
import pytest
from collections import Counter
from vllm_pd_spec.config import SchedulerConfig, CacheConfig
from vllm_pd_spec.engine.request import Request
from vllm_pd_spec.engine.llm_engine import LLMEngine, PDPair, make_config, peak_blocks_alone

@pytest.fixture(scope='module')
def eng():
    return LLMEngine(make_config('mtp', 2, block_size=4, scheduler_config=SchedulerConfig(max_model_len=64),
                                 cache_config=CacheConfig(num_gpu_blocks=9)))

BAD = [  # (field named in the error, request keyword arguments)
    ('prompt_token_ids', dict(prompt_token_ids=[])),
    ('max_tokens', dict(max_tokens=None)), ('max_tokens', dict(max_tokens='8')), ('max_tokens', dict(max_tokens=True)),
    ('max_tokens', dict(max_tokens=0)), ('max_tokens', dict(max_tokens=-3)), ('max_tokens', dict(max_tokens=2.0)),
    ('prompt_token_ids', dict(prompt_token_ids=[1, 2.5, 3])), ('prompt_token_ids', dict(prompt_token_ids='abc')),
    ('prompt_token_ids', dict(prompt_token_ids=[1, True])), ('vocabulary', dict(prompt_token_ids=[1, 10**9])),
    ('vocabulary', dict(prompt_token_ids=[-1, 2])), ('prompt_token_ids', dict(prompt_token_ids=[1] * 65)),
    ('eos_token_id', dict(eos_token_id='x')), ('eos_token_id', dict(eos_token_id=10**9)),
    ('kv_transfer_params', dict(kv_transfer_params=[1])),
    ('max_tokens', dict(prompt_token_ids=[1] * 30, max_tokens=30)),  # prompt + outputs cannot fit 8 blocks
]

@pytest.mark.parametrize('field,kw', BAD)
def test_bad_request_refused_at_add_and_engine_lives(eng, field, kw):
    good = Request('ok', [3, 4, 5, 6, 7], max_tokens=3)
    kw = dict(dict(prompt_token_ids=[3, 4, 5], max_tokens=4), **kw)
    with pytest.raises((ValueError, TypeError)) as e: eng.add_request(Request('bad', **kw))
    assert field in str(e.value) and 'bad' not in eng.scheduler.requests
    eng.add_request(good); eng.run(200)
    assert eng.dead is None and len(eng.outputs['ok']) == 3 and not eng.has_work()
    del eng.outputs['ok'], eng.finished['ok']

def test_duplicate_request_id_in_flight_refused(eng):
    eng.add_request(Request('dup', [3, 4, 5], max_tokens=2))
    with pytest.raises(ValueError, match='request_id'): eng.add_request(Request('dup', [6, 7], max_tokens=2))
    eng.run(100)
    assert eng.dead is None and len(eng.outputs['dup']) == 2
    eng.add_request(Request('dup', [6, 7], max_tokens=2))  # finished: the id may come again
    eng.run(100); assert eng.dead is None

def test_no_request_dropped_silently(eng):
    "Every request near the pool's size is refused at add, finishes with its tokens, or is finished 'abort' when it strands an idle engine."
    have, seen = eng.scheduler.kv_cache_config.num_blocks - 1, Counter()
    for i, (p, t) in enumerate((p, t) for p in (1, 7, 13, 19, 25) for t in (1, 8, 16)):
        rid, prompt = f'g{i}', [(7 * i + j) % (eng.vocab_size - 3) + 3 for j in range(p)]  # no prefix hits
        need = peak_blocks_alone(eng.scheduler, p, t)
        try: eng.add_request(Request(rid, prompt, max_tokens=t))
        except ValueError as e: assert need > have and 'max_tokens' in str(e); seen['refused'] += 1; continue
        assert need <= have
        eng.run(500)
        assert not eng.has_work() and eng.dead is None
        reason = eng.finished[rid].finish_reason
        n = len(eng.outputs[rid])
        assert (reason == 'length' and n == t) or (reason == 'abort' and n < t), (p, t, reason, n)
        seen['done' if reason == 'length' else 'stranded'] += 1
    assert seen['stranded'] == eng.num_stranded and min(seen['refused'], seen['done'], seen['stranded']) > 0, seen

def test_pd_pair_refuses_before_queueing():
    pd = PDPair('mtp', 2, block_size=4, cache_config=CacheConfig(num_gpu_blocks=64))
    for bad in ([], [1, 'x'], [1] * 5000):
        with pytest.raises((ValueError, TypeError), match='prompt_token_ids'): pd.generate([[3, 4, 5, 6], bad], 4)
        assert not pd.P.has_work() and not pd.D.has_work()
    with pytest.raises(ValueError, match='max_tokens'): pd.generate([[3, 4, 5, 6]], 0)
    out = pd.generate([[3, 4, 5, 6, 7, 8]], 4)
    assert len(out[0]) == 4 and pd.P.dead is None and pd.D.dead is None
