"Upstream's KV-cache examples (block pool, prefix caching, sliding window, GDN) on the engine."
import pytest
from vllm_pd_spec.config import LayerSpec, ModelConfig, SpeculativeConfig, VllmConfig, Fixes
from vllm_pd_spec.engine.block_pool import BlockPool
from vllm_pd_spec.engine.request import Request, hash_block_tokens
from vllm_pd_spec.engine.kv_cache_manager import (KVCacheConfig, KVCacheGroupSpec, KVCacheManager, SlidingWindowSpec,
                                                  SlotChecker, get_kv_cache_config)

def manager(layers=('full_attention',), num_blocks=32, block_size=4, spec=None, fixes=Fixes(), window=8, **kw):
    ls = tuple(LayerSpec(k, window if k == 'sliding_window' else None) for k in layers)
    vc = VllmConfig(spec, ModelConfig(ls, block_size=block_size), fixes=fixes)
    return KVCacheManager(get_kv_cache_config(vc, num_blocks, **kw), max_model_len=256)

def test_block_hashes_chain_and_follow_truncation():
    r = Request('r', list(range(12)), block_size=4)
    h = list(r.block_hashes)
    assert len(h) == 3 and h[1] == hash_block_tokens(h[0], [4, 5, 6, 7])
    del r._all_token_ids[-1]
    assert r.block_hashes == h   # eager hashes: a truncation says which ones it invalidated
    r.truncate_block_hashes(4)
    assert r.block_hashes == h[:2]

def test_pool_double_free_refused_and_eviction_order():
    pool = BlockPool(4)
    a = pool.get_new_blocks(3)
    pool.free_blocks(reversed(a))
    with pytest.raises(AssertionError): pool.free_blocks(a[:1])
    assert [b.block_id for b in pool.get_new_blocks(3)] == [3, 2, 1]
    with pytest.raises(ValueError): pool.get_new_blocks(1)

@pytest.mark.parametrize('n_prompt,expected_hit', [(12, 8), (13, 12), (3, 0), (4, 0), (5, 4)])
def test_prefix_hit_capped_at_num_tokens_minus_one(n_prompt, expected_hit):
    kvm = manager()
    a = Request('a', list(range(16)), block_size=4)
    kvm.allocate_slots(a, 16)
    b = Request('b', list(range(n_prompt)), block_size=4)
    assert kvm.get_computed_blocks(b)[1] == expected_hit

def test_allocate_none_when_short_and_lookahead_blocks():
    kvm = manager(num_blocks=4)
    r = Request('r', list(range(8)), block_size=4)
    assert len(kvm.allocate_slots(r, 8, num_lookahead_tokens=1).blocks[0]) == 3
    assert kvm.allocate_slots(Request('s', [1], block_size=4), 1) is None
    kvm.free(r)
    assert kvm.get_num_free_blocks() == 3

def test_hit_blocks_revived_from_free_queue_are_counted():
    kvm = manager(num_blocks=4)  # 3 usable
    a = Request('a', list(range(9)), block_size=4)
    kvm.allocate_slots(a, 9); kvm.free(a)
    b = Request('b', list(range(9)) + [50, 51, 52, 53], block_size=4)
    hit, n = kvm.get_computed_blocks(b)
    assert n == 8
    assert kvm.allocate_slots(b, 5, n, hit) is None  # 2 revived + 2 new > 3 free
    assert kvm.get_num_free_blocks() == 3  # a refusal changes nothing
    assert kvm.allocate_slots(b, 4, n, hit) is not None and kvm.get_num_free_blocks() == 0

@pytest.mark.parametrize('extra,kept', [(0, [0, 0, 0, 4]), (2, [0, 0, 3, 4]), (6, [0, 2, 3, 4])])
def test_sliding_window_keeps_extra_retained(extra, kept):
    cfg = KVCacheConfig(32, (KVCacheGroupSpec(('l',), SlidingWindowSpec(4, 8, extra)),))
    kvm = KVCacheManager(cfg, max_model_len=64)
    r = Request('r', list(range(24)), block_size=4)
    kvm.allocate_slots(r, 20); r.num_computed_tokens = 20
    kvm.allocate_slots(r, 1)
    assert kvm.get_block_ids('r')[0][:4] == kept

def test_planner_extra_retained_follows_contract():
    mtp = SpeculativeConfig('mtp', 4, num_mtp_modules=4)
    for fixes, extra in ((Fixes(), 3), (Fixes().off('lookahead_contract'), 0)):  # 0.27.1 keeps no extra tokens
        cfg = get_kv_cache_config(VllmConfig(mtp, ModelConfig((LayerSpec('sliding_window', 16),)), fixes=fixes), 8)
        assert cfg.kv_cache_groups[0].kv_cache_spec.extra_retained_tokens == extra
    cfg = get_kv_cache_config(VllmConfig(SpeculativeConfig('eagle', 4), ModelConfig((LayerSpec('sliding_window', 16),))), 8)
    assert cfg.kv_cache_groups[0].kv_cache_spec.extra_retained_tokens == 0

def test_sliding_window_hit_needs_a_window_of_blocks():
    kvm = manager(layers=('full_attention', 'sliding_window'), window=8)
    a = Request('a', list(range(20)), block_size=4)
    kvm.allocate_slots(a, 20)
    hit, n = kvm.get_computed_blocks(Request('b', list(range(20)) + [9], block_size=4))
    assert n == 20 and hit.get_block_ids()[1][-2:] != [0, 0]

def test_gdn_group_keeps_only_live_state_and_hits_at_block_boundary():
    kvm = manager(layers=('full_attention', 'gdn'))
    a = Request('a', list(range(10)), block_size=4)
    kvm.allocate_slots(a, 10); a.num_computed_tokens = 10
    kvm.allocate_slots(a, 1)
    assert kvm.get_block_ids('a')[1][:2] == [0, 0]
    hit, n = kvm.get_computed_blocks(Request('b', list(range(10)) + [7], block_size=4))
    assert n == 8 and hit.get_block_ids()[1][0] == 0 and hit.get_block_ids()[1][1] != 0

def test_slot_checker_kinds():
    kvm = manager()
    chk = SlotChecker(kvm)
    a = Request('a', list(range(8)), block_size=4)
    kvm.allocate_slots(a, 8); a.num_computed_tokens = 8
    assert chk.check_write('a', 0, range(8)) == [] and chk.check_write('a', 0, [8])[0].kind == 'out_of_allocation'
    b = Request('b', list(range(9)), block_size=4)
    hit, n = kvm.get_computed_blocks(b)
    kvm.allocate_slots(b, 1, n, hit)
    assert chk.check_write('b', 0, [0])[0].kind == 'cached_block' and chk.check_write('b', 0, [8]) == []
    assert chk.check_write('a', 0, [0]) == []  # a produced that block; b only reads it
    assert chk.counts() == {'out_of_allocation': 1, 'cached_block': 1}


def _hit(kvm, tokens): return kvm.get_computed_blocks(Request('probe', tokens, block_size=4))[1]

@pytest.mark.parametrize('n,probe', [(12, 13), (16, 17), (20, 25), (8, 9)])
def test_eagle_drop_loses_one_block_with_one_group(n, probe):
    "0.33.0's UnitaryKVCacheCoordinator: the capped hit, minus one block for an EAGLE/MTP drafter."
    for use_eagle in (False, True):
        kvm = manager(num_blocks=32) if not use_eagle else KVCacheManager(manager(num_blocks=32).kv_cache_config, 64, use_eagle=True)
        kvm.allocate_slots(Request('a', list(range(n)), block_size=4), n)
        capped = min(n, probe - 1) // 4 * 4
        assert _hit(kvm, list(range(probe))) == (max(0, capped - 4) if use_eagle else capped)

def test_eagle_drop_with_two_groups_looks_one_block_further():
    "0.33.0's HybridKVCacheCoordinator: a cached block after the hit proves its tail; no drop then."
    kvm = manager(layers=('full_attention', 'gdn'), num_blocks=32)
    kvm = KVCacheManager(kvm.kv_cache_config, 64, use_eagle=True)
    kvm.allocate_slots(Request('a', list(range(16)), block_size=4), 16)
    assert _hit(kvm, list(range(16))) == 12
    assert _hit(kvm, list(range(15)) + [99]) == 8
    assert _hit(kvm, list(range(13))) == 8   # the request has no hash for block 3: nothing proves block 2's tail

@pytest.mark.parametrize('reprefillable', [0, 1, 3, 5])
def test_publication_holds_back_the_reprefillable_tail(reprefillable):
    "0.33.0's KVCacheCoordinator.get_num_cacheable_tokens: the last `L - 1` computed tokens are never published."
    for n in range(1, 30):
        kvm = KVCacheManager(manager(num_blocks=32).kv_cache_config, 64, num_reprefillable_tokens=reprefillable)
        kvm.allocate_slots(Request('a', list(range(n)), block_size=4), n)
        assert _hit(kvm, list(range(n)) + [99]) == max(0, n - reprefillable) // 4 * 4

def test_publication_rule_is_the_schedulers_choice():
    from vllm_pd_spec.engine.scheduler import Scheduler
    mtp = SpeculativeConfig('mtp', 4, num_mtp_modules=4)
    for fixes, r in ((Fixes(), 3), (Fixes().off('lookahead_contract'), 0)):
        s = Scheduler(VllmConfig(mtp, ModelConfig((LayerSpec('full_attention'),), 4), fixes=fixes))
        assert s.kv_cache_manager.num_reprefillable_tokens == r and s.kv_cache_manager.use_eagle
    with pytest.raises(ValueError, match='num_reprefillable_tokens'): KVCacheManager(manager().kv_cache_config, 64, num_reprefillable_tokens=-1)

def test_a_gdn_hit_on_a_state_published_this_step_waits_for_the_next():
    "0.34.0's `cached_blocks_this_step`: the state after a block is computed by the step that publishes it."
    kvm = manager(('full_attention', 'gdn'))
    a, b = Request('a', list(range(10)), block_size=4), Request('b', list(range(10)), block_size=4)
    kvm.new_step_starts()
    assert kvm.allocate_slots(a, 10) is not None
    hit, n = kvm.get_computed_blocks(b)
    assert n == 8 and kvm.allocate_slots(b, 2, n, hit) is None and 'b' not in kvm.managers[0].req_to_blocks
    kvm.new_step_starts()
    hit, n = kvm.get_computed_blocks(b)
    assert kvm.allocate_slots(b, 2, n, hit) is not None and kvm.get_block_ids('b')[0][:2] == kvm.get_block_ids('a')[0][:2]

def test_an_attention_only_hit_in_the_same_step_is_taken():
    "Attention KV is written before any row reads it: no wait without a GDN group."
    kvm = manager()
    a, b = Request('a', list(range(10)), block_size=4), Request('b', list(range(10)), block_size=4)
    kvm.new_step_starts(); kvm.allocate_slots(a, 10)
    hit, n = kvm.get_computed_blocks(b)
    assert n == 8 and kvm.allocate_slots(b, 2, n, hit) is not None

@pytest.fixture(scope='module')
def text_hybrid():
    import torch
    from vllm_pd_spec.model.drafters import load_model, model_prompts
    return load_model('text-hybrid', torch.float64), model_prompts('text-hybrid', 2, prompt_len=40, reserve=16)

@pytest.mark.parametrize('method', [None, 'eagle', 'dflash'])
def test_one_prompt_twice_in_one_step_on_the_hybrid_model(text_hybrid, method):
    "The same prompt twice in one `generate` on text-hybrid: prefix caching on gives what it gives off (standalone and P/D)."
    import torch
    from vllm_pd_spec.config import CacheConfig
    from vllm_pd_spec.engine.llm_engine import LLMEngine, PDPair, make_config
    model, (p, q) = text_hybrid
    run = lambda caching: LLMEngine(make_config(method, 2, model=model, block_size=4, cache_config=CacheConfig(
        enable_prefix_caching=caching)), model, dtype=torch.float64).generate([p, p, q, p], 8)
    want = run(False)
    assert want[0] == want[1] == want[3] and run(True) == want
    assert PDPair(method, 2, model=model, block_size=4, dtype=torch.float64).generate([p, p, q, p], 8) == want
