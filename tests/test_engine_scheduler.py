"Upstream's scheduler and NIXL connector examples as plain tests on the engine."
from types import SimpleNamespace
import pytest
from dataclasses import replace
from vllm_pd_spec.config import (Fixes, LayerSpec, ModelConfig, SpeculativeConfig, VllmConfig, SchedulerConfig, CacheConfig,
                                 make_kv_transfer_params)
from vllm_pd_spec.engine.request import Request, RequestStatus
from vllm_pd_spec.engine.outputs import KVConnectorOutput
from vllm_pd_spec.engine.scheduler import Scheduler, SchedulerAssertionError
from vllm_pd_spec.engine.toy_runner import toy_runner_output

FULL = ModelConfig((LayerSpec('full_attention'),), block_size=4)
GDN = ModelConfig((LayerSpec('full_attention'), LayerSpec('gdn')), block_size=4)
SWA = ModelConfig((LayerSpec('sliding_window', 8),), block_size=4)
MTP3 = SpeculativeConfig('mtp', 3, num_mtp_modules=3)

def sched(vllm_config:VllmConfig, num_blocks:int=256, **kw)->Scheduler:
    "A scheduler over `vllm_config` with a pool of `num_blocks` and the scheduler limits `kw`."
    return Scheduler(replace(vllm_config, scheduler_config=SchedulerConfig(**kw), cache_config=CacheConfig(num_blocks)))

def run(s, steps=100, **kw):
    for _ in range(steps):
        if not s.has_requests(): return
        scheduler_output = s.schedule(); s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output, **kw))

@pytest.mark.parametrize('remaining,expected', [(0, 10), (1, 7), (2, 7), (3, 7)])
def test_reserve_multi_module_mtp_prefill_lookahead(remaining, expected):
    s = Scheduler(VllmConfig(MTP3, FULL))
    assert s._reserve_prefill_lookahead(SimpleNamespace(num_tokens=10), 0, 10 - remaining) == expected

def test_lookahead_numbers_follow_fixes():
    df = SpeculativeConfig('dflash', 4)
    assert Scheduler(VllmConfig(df, FULL)).num_lookahead_tokens == 5
    assert Scheduler(VllmConfig(df, FULL, fixes=Fixes().off('dflash_slots'))).num_lookahead_tokens == 4
    assert Scheduler(VllmConfig(MTP3, FULL)).num_prefill_lookahead == 3
    assert Scheduler(VllmConfig(SpeculativeConfig('eagle', 3), FULL)).num_prefill_lookahead == 1

def test_chunked_prefill_respects_budget():
    s = sched(VllmConfig(model=FULL), max_num_batched_tokens=16)
    for i in range(3): s.add_request(Request(f'r{i}', [i] * 20, max_tokens=2))
    seen = []
    while s.has_requests():
        scheduler_output = s.schedule()
        assert 0 < scheduler_output.total_num_scheduled_tokens <= 16 and all(n > 0 for n in scheduler_output.num_scheduled_tokens.values())
        seen.append(dict(scheduler_output.num_scheduled_tokens))
        s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output))
    assert seen[:2] == [{'r0': 16}, {'r0': 4, 'r1': 12}]

def test_long_prefill_threshold_and_no_chunking():
    s = sched(VllmConfig(model=FULL), max_num_batched_tokens=64, long_prefill_token_threshold=5)
    s.add_request(Request('a', list(range(12))))
    assert s.schedule().num_scheduled_tokens == {'a': 5}
    s = sched(VllmConfig(model=FULL), max_num_batched_tokens=8, enable_chunked_prefill=False)
    s.add_request(Request('a', list(range(12))))
    assert s.schedule().num_scheduled_tokens == {}

def test_reserve_shrinks_last_chunk_for_mtp():
    s = sched(VllmConfig(MTP3, FULL), max_num_batched_tokens=9)
    s.add_request(Request('a', list(range(10)), max_tokens=1))
    assert s.schedule().num_scheduled_tokens == {'a': 7}  # 9 would leave 1 < 3 tokens for the last chunk

def test_preemption_by_recompute_and_pool_full_at_end():
    s = sched(VllmConfig(model=FULL), num_blocks=6, max_num_batched_tokens=64)
    for i in range(2): s.add_request(Request(f'q{i}', [10 + i] * 8, max_tokens=6))
    preempted = []
    while s.has_requests():
        scheduler_output = s.schedule(); preempted += sorted(scheduler_output.preempted_req_ids)
        s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output))
    assert preempted == ['q1'] and s.kv_cache_manager.get_num_free_blocks() == 5

def test_spec_decode_rejections_roll_back_computed_tokens():
    s = Scheduler(VllmConfig(SpeculativeConfig('eagle', 3), FULL))
    s.add_request(Request('e', list(range(6)), max_tokens=20))
    run(s, steps=1)
    scheduler_output = s.schedule()
    assert scheduler_output.num_scheduled_tokens == {'e': 4} and len(scheduler_output.scheduled_spec_decode_tokens['e']) == 3
    s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output, accept=0))
    r = s.requests['e']
    assert r.num_computed_tokens == r.num_tokens - 1 == 7
    assert s.spec_decoding_stats.num_draft_tokens == 3 and s.spec_decoding_stats.num_accepted_tokens == 0

def test_no_drafts_kept_for_prefill_chunks():
    s = sched(VllmConfig(SpeculativeConfig('eagle', 2), FULL), max_num_batched_tokens=4)
    s.add_request(Request('e', list(range(10))))
    run(s, steps=1)
    assert s.requests['e'].spec_token_ids == []

def test_abort_frees_blocks_everywhere():
    s = sched(VllmConfig(model=FULL), max_num_batched_tokens=8)
    for i in range(3): s.add_request(Request(f'a{i}', list(range(10))))
    scheduler_output = s.schedule(); s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output))
    s.finish_requests(['a0', 'a2'])
    assert s.schedule().finished_req_ids == {'a0', 'a2'}
    s.finish_requests('a1')
    assert not s.requests and s.kv_cache_manager.get_num_free_blocks() == 255

def test_eos_stops():
    s = Scheduler(VllmConfig(model=FULL))
    s.add_request(Request('a', [1, 2, 3], max_tokens=10, eos_token_id=7))
    scheduler_output = s.schedule(); (out,) = s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output, token=7))
    assert out.finish_reason == 'stop' and not s.requests

# --- the connector (upstream's tests/v1/kv_connector/unit/test_nixl_connector_hma.py, as the fixed code does them)

@pytest.mark.parametrize('model,expected', [(GDN, 9), (FULL, 10), (SWA, 10)])
def test_mamba_n1_d_side(model, expected):
    s = Scheduler(VllmConfig(model=model, role='decode'))
    r = Request('d', list(range(10)), kv_transfer_params=make_kv_transfer_params(do_remote_prefill=True))
    assert s.connector.get_num_new_matched_tokens(r, 0) == (expected, True)

@pytest.mark.parametrize('fixes,where', [(Fixes(), 'on_new_request'), (Fixes().off('truncation_ordering'), 'matched')])
def test_p_side_truncation_once(fixes, where):
    s = Scheduler(VllmConfig(model=GDN, role='prefill', fixes=fixes))
    r = Request('p', list(range(10)), max_tokens=128, kv_transfer_params=make_kv_transfer_params(do_remote_decode=True))
    s.connector.on_new_request(r)
    assert r.num_prompt_tokens == (9 if where == 'on_new_request' else 10)
    assert s.connector.get_num_new_matched_tokens(r, 0) == (0, False)
    s.connector.get_num_new_matched_tokens(r, 0); s.connector.on_new_request(r)
    assert (r.num_prompt_tokens, r.max_tokens, r.kv_transfer_params['_p_side_truncated']) == (9, 1, True)

def test_non_mamba_p_side_skips_truncation_without_mtp():
    s = Scheduler(VllmConfig(model=FULL, role='prefill'))
    r = Request('p', list(range(10)), kv_transfer_params=make_kv_transfer_params(do_remote_decode=True))
    s.add_request(r)
    assert r.num_prompt_tokens == 10

def test_mtp_backoff_on_both_sides():
    p = Scheduler(VllmConfig(MTP3, FULL, role='prefill'))
    r = Request('p', list(range(10)), kv_transfer_params=make_kv_transfer_params(do_remote_decode=True))
    p.add_request(r)
    assert r.num_prompt_tokens == 8
    d = Scheduler(VllmConfig(MTP3, FULL, role='decode'))
    assert d.connector.get_num_new_matched_tokens(
        Request('d', list(range(10)), kv_transfer_params=make_kv_transfer_params(do_remote_prefill=True)), 0) == (8, True)

def test_issue_53514_legacy_ordering_trips_assertion():
    s = Scheduler(VllmConfig(model=GDN, role='prefill', fixes=Fixes().off('truncation_ordering')))
    new = lambda rid: Request(rid, list(range(9)), kv_transfer_params=make_kv_transfer_params(do_remote_decode=True))
    s.add_request(new('a')); run(s, steps=2)
    s.add_request(new('b'))
    with pytest.raises(AssertionError, match=r'assert num_new_tokens > 0'): s.schedule()
    s = Scheduler(VllmConfig(model=GDN, role='prefill'))
    s.add_request(new('a')); run(s, steps=2)
    s.add_request(new('b'))
    assert s.schedule().num_scheduled_tokens == {'b': 4}

def test_pd_handoff_holds_p_blocks_and_loads_d_async():
    P = sched(VllmConfig(model=GDN, role='prefill'), num_blocks=64)
    D = sched(VllmConfig(model=GDN, role='decode'), num_blocks=64)
    prompt = list(range(10))
    P.add_request(Request('r', prompt, max_tokens=50, kv_transfer_params=make_kv_transfer_params(do_remote_decode=True)))
    scheduler_output = P.schedule(); (out,) = P.update_from_output(scheduler_output, toy_runner_output(P, scheduler_output))
    assert out.finish_reason == 'length' and out.kv_transfer_params['remote_num_tokens'] == 9
    assert P.has_requests() and P.kv_cache_manager.get_num_free_blocks() < 63
    D.add_request(Request('r', prompt, max_tokens=2, kv_transfer_params=dict(out.kv_transfer_params)))
    scheduler_output = D.schedule()
    assert not scheduler_output.num_scheduled_tokens and D.requests['r'].status == RequestStatus.WAITING_FOR_REMOTE_KVS
    m = scheduler_output.kv_connector_metadata.reqs_to_recv['r']
    assert m.remote_block_ids == out.kv_transfer_params['remote_block_ids'] and m.num_tokens == 9
    scheduler_output = D.schedule(); assert not scheduler_output.num_scheduled_tokens  # still loading
    D.update_from_output(scheduler_output, toy_runner_output(D, scheduler_output, kv_connector_output=KVConnectorOutput(finished_recving={'r'})))
    scheduler_output = P.schedule(); P.update_from_output(scheduler_output, toy_runner_output(P, scheduler_output, kv_connector_output=KVConnectorOutput(finished_sending={'r'})))
    assert not P.has_requests() and P.kv_cache_manager.get_num_free_blocks() == 63
    scheduler_output = D.schedule()
    assert scheduler_output.num_scheduled_tokens == {'r': 1} and scheduler_output.scheduled_new_reqs[0].num_computed_tokens == 9
    D.update_from_output(scheduler_output, toy_runner_output(D, scheduler_output)); run(D)
    assert not D.has_requests() and D.kv_cache_manager.get_num_free_blocks() == 63

def test_d_side_abort_while_loading_keeps_blocks_until_load_done():
    D = sched(VllmConfig(model=FULL, role='decode'), num_blocks=16)
    params = make_kv_transfer_params(do_remote_prefill=True, remote_engine_id='p', remote_request_id='x',
                                     remote_block_ids=([1, 2, 3],))
    D.add_request(Request('x', list(range(10)), kv_transfer_params=params))
    D.schedule()
    D.finish_requests('x')
    assert D.kv_cache_manager.get_num_free_blocks() == 12  # a load in flight still writes them
    scheduler_output = D.schedule(); D.update_from_output(scheduler_output, toy_runner_output(D, scheduler_output, kv_connector_output=KVConnectorOutput(finished_recving={'x'})))
    assert not D.has_requests() and D.kv_cache_manager.get_num_free_blocks() == 15

def test_dflash_first_prefill_gets_lookahead_slots_unless_async_eagle():
    df = SpeculativeConfig('dflash', 3)
    for fixes, blocks in ((Fixes(), 2), (Fixes().off('dflash_slots'), 1)):
        s = Scheduler(VllmConfig(df, FULL, fixes=fixes))
        s.add_request(Request('a', list(range(4))))
        scheduler_output = s.schedule()
        assert len(scheduler_output.scheduled_new_reqs[0].block_ids[0]) == blocks
    D = sched(VllmConfig(df, FULL, role='decode'), num_blocks=16)
    params = make_kv_transfer_params(do_remote_prefill=True, remote_engine_id='p', remote_request_id='x', remote_block_ids=([1],))
    D.add_request(Request('x', list(range(4)), kv_transfer_params=params))
    D.schedule()
    assert len(D.kv_cache_manager.get_block_ids('x')[0]) == 1  # no lookahead while the KV loads (#22317)

def test_failed_load_is_recomputed_locally():
    D = sched(VllmConfig(model=FULL, role='decode'), num_blocks=16)
    params = make_kv_transfer_params(do_remote_prefill=True, remote_engine_id='p', remote_request_id='x',
                                     remote_block_ids=([1, 2, 3],))
    D.add_request(Request('x', list(range(10)), max_tokens=1, kv_transfer_params=params))
    scheduler_output = D.schedule()
    D.update_from_output(scheduler_output, toy_runner_output(D, scheduler_output, kv_connector_output=KVConnectorOutput(failed_recving={'x'})))
    assert D.kv_cache_manager.get_num_free_blocks() == 15 and D.requests['x'].status == RequestStatus.WAITING
    scheduler_output = D.schedule()
    assert scheduler_output.num_scheduled_tokens == {'x': 10}
    D.update_from_output(scheduler_output, toy_runner_output(D, scheduler_output))
    assert not D.has_requests() and D.kv_cache_manager.get_num_free_blocks() == 15

def test_limits_come_from_the_config():
    "The scheduler reads its limits from `VllmConfig`; a stray positional pool size is refused, naming the argument."
    s = sched(VllmConfig(model=FULL), num_blocks=12, max_num_batched_tokens=7, max_num_seqs=2)
    assert (s.max_num_scheduled_tokens, s.max_num_running_reqs, s.kv_cache_config.num_blocks) == (7, 2, 12)
    with pytest.raises(TypeError, match='kv_cache_config'): Scheduler(VllmConfig(model=FULL), 64)

def test_waiting_request_skipped_when_the_reserve_leaves_nothing():
    "vLLM 0.33.0's Scheduler.schedule: a chunk shrunk to 0 skips the request (skip_request) and the loop goes on."
    full = ModelConfig((LayerSpec('full_attention'),), block_size=4)
    s = Scheduler(VllmConfig(SpeculativeConfig('mtp', 3, num_mtp_modules=3), full,
                             scheduler_config=SchedulerConfig(max_num_batched_tokens=6, pad_spec_decode=False),
                             cache_config=CacheConfig(num_gpu_blocks=64)))
    for rid, n in (('a', 8), ('b', 3), ('c', 1)): s.add_request(Request(rid, list(range(n)), max_tokens=2))
    scheduler_output = s.schedule()
    assert scheduler_output.num_scheduled_tokens == {'a': 5, 'c': 1} and [r.request_id for r in s.waiting] == ['b']
    for _ in range(6):  # b runs once the budget can cover it
        s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output))
        scheduler_output = s.schedule()
        if 'b' in scheduler_output.num_scheduled_tokens: break
    assert scheduler_output.num_scheduled_tokens['b'] == 3

def test_padded_step_counts_as_vllm_counts():
    "A request admitted with one token left (a full prefix hit) is padded with k placeholders: vLLM counts k drafts, 0 accepted."
    s = sched(VllmConfig(SpeculativeConfig('ngram', 3), FULL))   # no drafter block dropped or held back: the hit is 8 of 9
    s.add_request(Request('a', list(range(9)), max_tokens=1)); run(s)
    assert s.spec_decoding_stats.num_drafts == 0
    s.add_request(Request('b', list(range(9)), max_tokens=4))
    scheduler_output = s.schedule()
    assert scheduler_output.scheduled_spec_decode_tokens['b'] == [-1] * 3   # the one-token tail, padded
    s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output))
    st, drafted = s.spec_decoding_stats, s.spec_decoding_stats_drafted
    assert (st.num_drafts, st.num_draft_tokens, st.num_accepted_tokens, st.mean_acceptance_length) == (1, 3, 0, 1.0)
    assert drafted.num_drafts == 0                            # ours, beside it: placeholders alone are no drafts
    run(s, accept=2)
    assert st.num_drafts == drafted.num_drafts + 1 and st.num_accepted_tokens == drafted.num_accepted_tokens > 0
    assert st.mean_acceptance_length < drafted.mean_acceptance_length
