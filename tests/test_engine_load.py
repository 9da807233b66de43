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
    ('prompt_token_ids', dict(prompt_token_ids=[1] * 30, max_tokens=30)),  # the prompt alone cannot fit 8 blocks
    ('max_tokens', dict(prompt_token_ids=[1] * 10, max_tokens=30)),  # prompt + outputs cannot
    ('block_size', dict(block_size=2)), ('block_size', dict(block_size='4')), ('prompt_token_ids', dict(prompt_token_ids=b'ab')),
    ('prompt_token_ids', dict(prompt_token_ids={3: 4})), ('prompt_token_ids', dict(prompt_token_ids={3, 4})),
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
    "Every request near the pool's size is refused at add (naming the prompt or `max_tokens`) or finishes with its tokens: the engine aborts none."
    have, seen = eng.scheduler.kv_cache_config.num_blocks - 1, Counter()
    for i, (p, t) in enumerate((p, t) for p in (1, 7, 13, 19, 25, 31) for t in (1, 8, 16)):
        rid, prompt = f'g{i}', [(7 * i + j) % (eng.vocab_size - 3) + 3 for j in range(p)]  # no prefix hits
        need = peak_blocks_alone(eng.scheduler, p, t)
        try: eng.add_request(Request(rid, prompt, max_tokens=t))
        except ValueError as e:
            assert need > have and ('max_tokens' in str(e) or 'prompt alone' in str(e)); seen['refused'] += 1; continue
        assert need <= have
        eng.run(500)
        assert not eng.has_work() and eng.dead is None
        assert eng.finished[rid].finish_reason == 'length' and len(eng.outputs[rid]) == t, (p, t)
        seen['done'] += 1
    assert eng.num_stranded == 0 and min(seen['refused'], seen['done']) > 0, seen

def test_a_request_d_accepted_is_never_aborted_after_a_preemption():
    "A 24-block D pool under a burst: D preempts, a resumed request re-prefills prompt + outputs; every request D accepted finishes."
    import random
    from vllm_pd_spec.config import make_kv_transfer_params
    from vllm_pd_spec.engine.toy_kv_runner import build_toy_engine
    from vllm_pd_spec.engine.transport import LocalTransport
    rng, t = random.Random(0), LocalTransport()
    P, D = build_toy_engine('prefill', t, 256), build_toy_engine('decode', t, 24)
    prompts, refused = {}, 0
    for i in range(80):
        rid, prompt = f'r{i}', [rng.randrange(1, 90) for _ in range(rng.randint(4, 56))]
        try: D.check_request(Request(rid, prompt, max_tokens=16, kv_transfer_params=make_kv_transfer_params(do_remote_prefill=True)))
        except ValueError: refused += 1; continue
        prompts[rid] = prompt
        P.add_request(Request(rid, prompt, max_tokens=1, kv_transfer_params=make_kv_transfer_params(do_remote_decode=True)))
    for _ in range(50_000):
        if not (P.has_work() or D.has_work()): break
        for o in P.step():
            if o.finish_reason: D.add_request(Request(o.request_id, prompts[o.request_id], max_tokens=16, kv_transfer_params=o.kv_transfer_params))
        D.step()
    assert D.dead is None and not (P.has_work() or D.has_work()) and D.num_stranded == 0
    assert len(prompts) > 40 and all(D.finished[rid].finish_reason == 'length' and len(D.outputs[rid]) == 16 for rid in prompts)

def test_pd_pair_refuses_before_queueing():
    pd = PDPair('mtp', 2, block_size=4, cache_config=CacheConfig(num_gpu_blocks=64))
    for bad in ([], [1, 'x'], [1] * 5000):
        with pytest.raises((ValueError, TypeError), match='prompt_token_ids'): pd.generate([[3, 4, 5, 6], bad], 4)
        assert not pd.P.has_work() and not pd.D.has_work()
    with pytest.raises(ValueError, match='max_tokens'): pd.generate([[3, 4, 5, 6]], 0)
    out = pd.generate([[3, 4, 5, 6, 7, 8]], 4)
    assert len(out[0]) == 4 and pd.P.dead is None and pd.D.dead is None

def _drive(pd, prompts:dict, max_tokens=3, abort_p=(), abort_d_after_load=()):
    "The proxy by hand: P, then D with P's params; aborts on P before it runs and on D once its load has landed."
    for rid, p in prompts.items(): pd.P.add_request(pd._prefill_request(rid, p))
    for rid in abort_p: pd.P.abort_request(rid)
    sent, pending_abort = set(abort_p), set(abort_d_after_load)
    for _ in range(2000):
        if not (pd.P.has_work() or pd.D.has_work() or len(sent) < len(prompts)): break
        for o in pd.P.step():
            if o.finish_reason == 'length' and o.request_id not in sent:
                sent.add(o.request_id)
                pd.D.add_request(Request(o.request_id, prompts[o.request_id], max_tokens=max_tokens,
                                         kv_transfer_params=dict(o.kv_transfer_params or {})))
        pd.D.step()
        for rid in [r for r in pending_abort if r in pd.D.worker._states]:  # loaded, not yet running
            pd.D.abort_request(rid); pending_abort.discard(rid)
    assert not pending_abort
    for _ in range(2): pd.P.step(); pd.D.step()  # idle steps: a runner hears of a finish at the next step, keeps a snapshot one more
    for eng in (pd.P, pd.D):
        for rid in list(eng.finished): eng.take_output(rid)

def _held(pd)->dict:
    "Every per-request object the pair still holds (0 when nothing is in flight), history excluded."
    w = pd.D.worker.in_use()
    return dict(p_finished_states=len(pd.P.runner.finished_states), d_finished_states=len(pd.D.runner.finished_states),
                d_states=w['states'], d_pending=w['pending_reads'] + w['finished'], p_states=pd.P.worker.in_use()['states'],
                requests=sum(len(e.scheduler.requests) + len(e.runner.requests) + len(e.outputs) + len(e.finished) for e in (pd.P, pd.D)),
                transport=sum(pd.transport.in_use().values()),
                blocks=sum(e.scheduler.kv_cache_manager.get_num_free_blocks() != e.scheduler.kv_cache_config.num_blocks - 1 for e in (pd.P, pd.D)))

def _rss_mib()->float:
    import os
    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2**20

def test_per_request_state_freed_and_memory_flat():
    "P's finished states, D's states of loads whose request was aborted, the worker's history: nothing grows with requests."
    import gc, random, torch
    from vllm_pd_spec.engine.transport import LocalTransport, PDConnectorWorker
    t = LocalTransport()
    pd = PDPair('mtp', 2, block_size=4, cache_config=CacheConfig(num_gpu_blocks=48), transport=t,
                decode_kw=dict(worker=PDConnectorWorker('decode-0', t, history=8)))
    rng = random.Random(3)
    def batch(tag, n=6):
        prompts = {f'{tag}-{i}': [rng.randrange(3, pd.P.vocab_size) for _ in range(rng.randrange(4, 20))] for i in range(n)}
        _drive(pd, prompts, abort_p=[f'{tag}-0'], abort_d_after_load=[f'{tag}-1', f'{tag}-2'])
        assert _held(pd) == dict.fromkeys(_held(pd), 0), _held(pd)
    def tensors():  # live tensors (the prefix cache's GDN states sit in rows allocated once, `state_store`: none per block)
        gc.collect()
        return sum(isinstance(o, torch.Tensor) for o in gc.get_objects())
    for b in range(2): batch(f'warm{b}')  # fills the worker's history
    n0, rss = tensors(), _rss_mib()
    for b in range(3): batch(f'b{b}')
    assert tensors() <= n0 + 4, (tensors(), n0)  # no tensor kept per request
    assert _rss_mib() - rss < 64  # 18 more requests: no per-request growth
    assert len(pd.D.worker.records) <= 8 and all(len(e.runner.state_saved) < 48 for e in (pd.P, pd.D))

def test_toy_kv_runner_after_a_prefix_hit_equals_standalone():
    "The toy runner's state counts the tokens of a prefix-cache hit: prompts that share a prefix give their lone outputs."
    from vllm_pd_spec.engine.toy_kv_runner import build_toy_engine
    base = list(range(3, 23))
    prompts = {f's{i}': base[:16] + [40 + i, 41, 42 + i] for i in range(4)}  # 16 shared tokens: four full blocks
    eng = build_toy_engine('standalone', None)
    for rid, p in prompts.items():  # one after another: each later one hits the first one's blocks
        eng.add_request(Request(rid, p, max_tokens=4)); eng.run()
    hits = [eng.finished[rid].num_cached_tokens for rid in prompts]
    assert hits[0] == 0 and min(hits[1:]) >= 12  # the later ones started from a hit
    for rid, p in prompts.items():
        alone = build_toy_engine('standalone', None)
        assert alone.generate([p], 4) == [eng.outputs[rid]], rid

def test_checksum_failure_drops_ps_block_from_its_prefix_cache():
    "P's block changes after its checksum: D recomputes, P uncaches the block, and the next same-prompt request is right."
    from vllm_pd_spec.engine.transport import LocalTransport
    from vllm_pd_spec.model.data import make_prompts
    prompt = make_prompts(1, seed=9)[0].prompt
    ref = LLMEngine(make_config('mtp', 2)).generate([prompt], 4)[0]
    tr = LocalTransport(faults={'req-0': 'corrupt'})
    pd = PDPair('mtp', 2, transport=tr)
    assert pd.generate([prompt], 4) == [ref]  # D's check caught it, D recomputed
    assert pd.D.worker.failures == [('req-0', 'checksum')] and pd.P.scheduler.num_uncached_corrupt == 1
    tr.faults.clear()
    pd.P.add_request(pd._prefill_request('again', prompt))  # the same prompt: P must compute it afresh
    while 'again' not in pd.P.finished: pd.P.step()
    o = pd.P.finished['again']
    assert o.num_cached_tokens == 0  # legacy: a hit on the changed block, whose new checksum then passes on D
    D2 = LLMEngine(make_config('mtp', 2, role='decode'), transport=tr, engine_id='decode-1')  # a D with no prefix cache of its own
    D2.add_request(Request('again', prompt, max_tokens=4, kv_transfer_params=dict(o.kv_transfer_params)))
    while D2.has_work() or pd.P.has_work(): D2.step(); pd.P.step()
    assert D2.outputs['again'] == ref and not D2.worker.failures

def test_a_request_computed_over_a_block_changed_on_p_is_recomputed_on_d():
    "Text model: P's cached prefix block changes after its checksum; a later request hits it on P, D holds the prefix itself and reads only the tail P computed over the changed block: D recomputes, the output is standalone's, P uncaches."
    import torch
    from vllm_pd_spec.engine.transport import LocalTransport
    from vllm_pd_spec.model.drafters import load_model, model_prompts
    from vllm_pd_spec.config import make_kv_transfer_params
    model = load_model('text-attn', torch.float64)
    texts = model_prompts('text-attn', 10, prompt_len=48, reserve=16)
    prompts = {f'r{i}': list(texts[0][:16]) + list(texts[8 + i][:8]) for i in range(2)}  # four shared blocks, then their own
    def engine(role, **kw):
        vc = make_config(None, 1, role, model=model, block_size=4, scheduler_config=SchedulerConfig(max_num_batched_tokens=256),
                         cache_config=CacheConfig(num_gpu_blocks=64, enable_prefix_caching=role != 'standalone'))
        return LLMEngine(vc, model, dtype=torch.float64, **kw)
    ref = engine('standalone').generate(list(prompts.values()), 8)
    t = LocalTransport()
    P, D = engine('prefill', transport=t), engine('decode', transport=t)
    def serve(rid):
        P.add_request(Request(rid, prompts[rid], max_tokens=1, kv_transfer_params=make_kv_transfer_params(do_remote_decode=True)))
        while rid not in P.finished: P.step()
        D.add_request(Request(rid, prompts[rid], max_tokens=8, kv_transfer_params=P.finished[rid].kv_transfer_params))
        while P.has_work() or D.has_work(): P.step(); D.step()
        return D.outputs[rid]
    assert serve('r0') == ref[0]  # D and P both cache the prefix
    first = min(b for e, _, b in t.block_digests if e == P.engine_id)  # P's first prefix block
    for parts in t.caches[P.engine_id].values():
        for _, x in parts: x[first].reshape(-1)[0] += 100.0  # changed after its checksum
    assert serve('r1') == ref[1]  # legacy: D took the tail computed over the changed block, a different output
    assert ('r1', 'checksum') in D.worker.failures and P.scheduler.num_uncached_corrupt == 1 and D.scheduler.num_recomputed_loads == 1

def test_forged_notices_bounded_and_abort_before_read_releases_p():
    "Notices for ids nobody published are capped; D aborting a request before its read frees P's blocks at once."
    from vllm_pd_spec.engine.transport import LocalTransport
    tr = LocalTransport(max_claims=16)
    for i in range(1000): tr.fail_read('decode-0', f'x{i}', 'prefill-0', f'forged-{i}', 'timeout')
    assert len(tr.claims) == 16 and tr.stats['dropped_claims'] == 1000 - 16
    pd = PDPair('mtp', 2, block_size=4, transport=LocalTransport(lease_s=1e9))  # a lease that never runs out
    prompt = [5, 6, 7, 8, 9, 10, 11, 12, 13]
    pd.P.add_request(pd._prefill_request('a', prompt))
    while not pd.P.finished: pd.P.step()
    params = pd.P.finished['a'].kv_transfer_params
    assert pd.P.scheduler.requests  # P holds the prompt's blocks for D
    pd.D.add_request(Request('a', prompt, max_tokens=4, kv_transfer_params=dict(params)))
    pd.D.abort_request('a')  # before D planned its read: the client went away
    for _ in range(4): pd.D.step(); pd.P.step()
    assert not pd.P.scheduler.requests and not pd.D.scheduler.requests and not any(pd.transport.in_use().values())
    assert pd.transport.stats['fault_aborted'] == 1

def test_generate_twice_gives_the_same_output():
    "Each `generate` call takes fresh request ids: the second call's output is the first's, on a pair and on one engine."
    pair, prompt = PDPair(), [1, 2, 3, 4, 5]
    first = pair.generate([prompt], max_tokens=4)
    assert pair.generate([prompt], max_tokens=4) == first and pair.generate([[9, 9, 9], prompt], max_tokens=4)[1] == first[0]
    eng = LLMEngine(make_config(None, 3))
    assert eng.generate([prompt], max_tokens=4) == eng.generate([prompt], max_tokens=4) == first

def test_an_id_whose_state_is_still_being_freed_is_refused():
    "An id that finished in the last step is refused until the next step has freed its state (else the cleanup hits the new request)."
    pair, prompt = PDPair(), [1, 2, 3, 4, 5]
    pair.generate([prompt], max_tokens=4)
    assert 'req-0' in pair.D.scheduler.finished_req_ids
    with pytest.raises(ValueError, match='request_id'): pair.D.add_request(Request('req-0', prompt, max_tokens=4))
    pair.D.step()
    pair.D.add_request(Request('req-0', prompt, max_tokens=4)); pair.D.abort_request('req-0')

def _toy(**kw):
    from vllm_pd_spec.config import LayerSpec, ModelConfig, SpeculativeConfig, VllmConfig
    from vllm_pd_spec.engine.toy_runner import ToyRunner
    return LLMEngine(VllmConfig(SpeculativeConfig('eagle', 2), ModelConfig((LayerSpec('full_attention'), LayerSpec('gdn')), block_size=4),
                                **kw), runner=ToyRunner)

def test_public_parameters_that_gave_silent_wrong_output_are_refused():
    "A request for another block size, a finished request again, a running request's output, P and D under one engine id."
    e = _toy()
    with pytest.raises(ValueError, match='block_size'): e.add_request(Request('a', [1, 2, 3, 4, 5], block_size=2))
    r = Request('r', [1, 2, 3, 4, 5], max_tokens=6)
    e.add_request(r); e.step()
    with pytest.raises(KeyError, match='has finished'): e.take_output('r')  # its tokens are still coming
    e.run()
    assert len(e.take_output('r')[0]) == 6
    with pytest.raises(ValueError, match='has run already'): e.add_request(r)
    with pytest.raises(ValueError, match='engine_id'): PDPair(block_size=4, prefill_kw=dict(engine_id='x'), decode_kw=dict(engine_id='x'))

def test_caller_side_mistakes_are_refused_up_front_or_leave_the_engine_alive():
    "A raising observer, a runner without `execute_model`, `max_tokens` set to junk later, huge token ids, a tiny staging slot."
    from vllm_pd_spec.engine.llm_engine import StepObserver, ObserverError
    from vllm_pd_spec.engine.toy_kv_runner import build_toy_engine
    e = _toy()
    e.add_observer(StepObserver(on_schedule=lambda so: 1 / 0))
    e.add_request(Request('a', [1, 2, 3], max_tokens=3))
    with pytest.raises(ObserverError) as err: e.step()
    assert e.dead is None and isinstance(err.value.__cause__, ZeroDivisionError)
    e.observers.clear(); e.run()
    assert len(e.outputs['a']) == 3
    with pytest.raises(TypeError, match='observer'): e.add_observer(object())
    with pytest.raises(TypeError, match='runner'): LLMEngine(e.scheduler.vllm_config, runner=lambda s, w: object())
    r = Request('b', [1, 2, 3], max_tokens=3); e.add_request(r)
    with pytest.raises(ValueError, match='max_tokens'): r.max_tokens = 'x'
    e.run(); assert e.dead is None and len(e.outputs['b']) == 3
    toy = build_toy_engine('standalone', None, 32)
    with pytest.raises(ValueError, match='2\\*\\*63'): toy.add_request(Request('c', [1, 2**63, 3]))
    nixl = pytest.importorskip('nixl')
    from vllm_pd_spec.engine.nixl_transport import NixlPair
    with pytest.raises(ValueError, match='state_slot_bytes'): build_toy_engine('prefill', NixlPair(state_slot_bytes=1), 32)

def test_back_pressure_bounds_and_signals():
    "`max_num_queued_reqs` refuses with `QueueOverflowError`; a prefill engine needs a transport; sizes have upper bounds; max_steps raises."
    from vllm_pd_spec.engine.llm_engine import QueueOverflowError
    e = _toy(scheduler_config=SchedulerConfig(max_num_queued_reqs=2))
    e.add_request(Request('a', [1, 2, 3])); e.add_request(Request('b', [1, 2, 4]))
    with pytest.raises(QueueOverflowError, match='max_num_queued_reqs=2'): e.add_request(Request('c', [1, 2, 5]))
    e.run(); e.add_request(Request('c', [1, 2, 5])); e.run()  # room again
    with pytest.raises(ValueError, match='transport'): LLMEngine(make_config(None, 1, 'prefill', block_size=4))
    with pytest.raises(ValueError, match='num_gpu_blocks'): CacheConfig(num_gpu_blocks=10**8)
    with pytest.raises(ValueError, match='max_num_seqs'): SchedulerConfig(max_num_seqs=10**6)
    from vllm_pd_spec.config import SpeculativeConfig, ModelConfig, LayerSpec
    for make, name in ((lambda: SpeculativeConfig('mtp', 2, num_mtp_modules=10**6), 'num_mtp_modules'), (lambda: SchedulerConfig(max_model_len=10**9), 'max_model_len'),
                       (lambda: ModelConfig((LayerSpec('full_attention'),), block_size=10**6), 'block_size')):
        with pytest.raises(ValueError, match=name): make()
    with pytest.raises(TimeoutError, match='max_steps=2'): e.generate([[1, 2, 3, 4, 5, 6, 7, 8, 9]], max_tokens=8, max_steps=2)
    assert not e.has_work()  # the call's unfinished requests were aborted

def test_pd_pair_holds_what_d_refuses_and_gives_p_blocks_back():
    "D's queue bound of 1: the proxy holds the rest and every output equals the unbounded pair's; D declining a request frees P's blocks at once."
    from vllm_pd_spec.engine.llm_engine import QueueOverflowError
    prompts = [[3 + i, 4, 5, 6, 7, 8] for i in range(5)]
    want = PDPair('mtp', 2, block_size=4).generate(prompts, 4)
    pd = PDPair('mtp', 2, block_size=4, decode_scheduler_config=SchedulerConfig(max_num_queued_reqs=1))
    assert pd.generate(prompts, 4) == want
    pd = PDPair('mtp', 2, block_size=4)
    pd.P.add_request(pd._prefill_request('x', prompts[0]))
    params = None
    while params is None: params = next((o.kv_transfer_params for o in pd.P.step() if o.finish_reason), None)
    pd.P.step()
    assert pd.P.has_work()  # P holds the blocks for D
    pd.D.decline_remote_kv('x', params)
    pd.P.step()
    assert not pd.P.has_work() and pd.transport.stats['fault_declined'] == 1
