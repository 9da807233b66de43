"""The engine's hooks beyond the six: the drop set and the per-group lookup, the path rule, the offloading tier, the drafter's own group
and the transfer set, the GDN state-slot exchange."""
import pytest, torch
from vllm_pd_spec.config import VllmConfig, ModelConfig, LayerSpec, SchedulerConfig, CacheConfig, KVTransferConfig, make_kv_transfer_params
from vllm_pd_spec.contracts.draft_groups import draft_group_ids, legacy_drop_group_ids, drop_group_ids, reported_54926_layout, transfer_group_ids
from vllm_pd_spec.engine.request import Request
from vllm_pd_spec.engine.kv_cache_manager import KVCacheManager, get_kv_cache_config
from vllm_pd_spec.engine.llm_engine import LLMEngine, PDPair, StepObserver, make_config, EngineDeadError
from vllm_pd_spec.engine.runner import ModelRunner, drafter_layer_names
from vllm_pd_spec.engine.transport import LocalTransport, PDConnectorWorker
from vllm_pd_spec.engine.kv_groups import get_kv_cache_config_own_draft_group, cache_groups, TransferSetWorker
from vllm_pd_spec.engine.offload import CPUStore, OffloadConfig, OffloadSpec, StoreAssertionError
from vllm_pd_spec.engine.state_exchange import exchange_state_slots, SlotListRunner, StateExchangeWorker
from vllm_pd_spec.model.drafters import load_model
from vllm_pd_spec.model.drafters import model_prompts

HY = VllmConfig(model=ModelConfig((LayerSpec('full_attention'), LayerSpec('gdn')), block_size=4))

def _cached(prompt_len=20, evict_gdn_from=None, drop_group_ids=frozenset()):
    kvm = KVCacheManager(get_kv_cache_config(HY, 64), max_model_len=128, drop_group_ids=drop_group_ids)
    a = Request('a', list(range(prompt_len)), block_size=4)
    kvm.allocate_slots(a, prompt_len); a.num_computed_tokens = prompt_len
    if evict_gdn_from is not None:
        for b in kvm.managers[1].req_to_blocks['a'][evict_gdn_from:]: kvm.block_pool._maybe_evict_cached_block(b)
    return kvm, Request('b', list(range(prompt_len)) + [99], block_size=4)

def test_drop_set_attention_only():
    hit = lambda drop: (lambda kvm, b: kvm.get_computed_blocks(b)[1])(*_cached(drop_group_ids=drop))
    assert hit(frozenset()) == 20
    assert hit({1}) == 20   # a GDN group ignores the flag
    assert hit({0}) == 16

def test_per_group_lookup_diverges_only_when_the_state_lags():
    kvm, b = _cached()
    assert kvm.get_computed_blocks_for_connector(b)[1:] == (20, False)
    kvm, b = _cached(evict_gdn_from=3)
    blocks, n, diverged = kvm.get_computed_blocks_for_connector(b)
    assert (n, diverged) == (20, True) and kvm.get_computed_blocks(b)[1] == 12 and len(blocks.blocks[1]) == 3

@pytest.fixture(scope='module')
def attn(): return load_model('text-attn', torch.float64)

@pytest.fixture(scope='module')
def hybrid(): return load_model('text-hybrid', torch.float64)

def _two_turns(eng, p1, follow, n=6):
    first = eng.generate([p1], max_tokens=n)[0]
    assert eng.scheduler.kv_cache_manager.block_pool.reset_prefix_cache()
    eng.add_request(Request('t2', p1 + first + follow, max_tokens=n)); eng.run()
    return p1 + first + follow, eng.outputs['t2'], eng.finished['t2'].num_cached_tokens

def _tier(model, method, config=OffloadConfig(), chunk=0, own_group=False, **switches):
    "An engine with an offloading tier built in; `config` an `OffloadConfig` or `config(kvc)`; `switches`: more `SchedulerConfig` fields."
    cfg = make_config(method, 3, model=model, scheduler_config=SchedulerConfig(max_num_batched_tokens=512, long_prefill_token_threshold=chunk, **switches),
                      cache_config=CacheConfig(num_gpu_blocks=96))
    layers = drafter_layer_names(model, method)
    kvc = get_kv_cache_config_own_draft_group(cfg, layers) if own_group else get_kv_cache_config(cfg, drafter_layer_names=layers)
    store = CPUStore()
    spec = OffloadSpec(store, config(kvc) if callable(config) else config)
    eng = LLMEngine(cfg, model, dtype=torch.float64, kv_cache_config=kvc, kv_transfer_config=KVTransferConfig(offload=spec))
    return cfg, kvc, store, eng, eng.scheduler.connector

def test_tier_serves_a_second_turn_losslessly(attn):
    p1, p2 = model_prompts('text-attn', 2, 90)
    cfg, kvc, store, eng, tier = _tier(attn, 'mtp', OffloadConfig(drop_group_ids={0}))
    prompt, out, hit = _two_turns(eng, p1, p2[:10])
    assert hit == 64 and out == LLMEngine(cfg, attn, dtype=torch.float64).generate([prompt], 6)[0]   # 5 blocks stored, the volatile last one popped

def test_load_mask_pruned_twice_leaves_a_claimed_block_unwritten(attn):
    p1, p2 = model_prompts('text-attn', 2, 90)
    for mask in ('fixed', 'legacy'):
        cfg, kvc, store, eng, tier = _tier(attn, 'mtp', OffloadConfig(drop_group_ids={0}, load_mask=mask))
        first = eng.generate([p1], max_tokens=6)[0]
        assert eng.scheduler.kv_cache_manager.block_pool.reset_prefix_cache()
        loaded = []  # the blocks of group 0 each load asks the worker for
        eng.add_observer(StepObserver(before_execute=lambda so: loaded.extend(
            len(j[0]) for j in (so.kv_connector_metadata.loads.values() if so.kv_connector_metadata else []))))
        eng.add_request(Request('t2', p1 + first + p2[:10], max_tokens=6)); eng.run()
        assert eng.finished['t2'].num_cached_tokens == 64 and loaded == ([4] if mask == 'fixed' else [3])

def test_store_forms_skip_leaves_holes_assert_kills(attn):
    p = model_prompts('text-attn', 1, 90)[0]
    for form in ('fixed', 'skip'):
        cfg, kvc, store, eng, tier = _tier(attn, 'eagle', OffloadConfig(store_form=form))
        out = eng.generate([p], max_tokens=24)[0]
        toks = p + out
        hashes = Request('h', toks, block_size=16).block_hashes[:(len(toks) - 1) // 16]
        missing = sum(not store.has(h, 0) for h in hashes)
        assert (missing == 0) if form == 'fixed' else (missing > 0), form
    # the Mooncake tracker on a padded one-token first step that crosses a block: D after a full transfer, EAGLE k=3
    t = LocalTransport()
    cache = CacheConfig(num_gpu_blocks=64)
    kvc = get_kv_cache_config(make_config('eagle', 3, 'decode', model=attn, cache_config=cache), drafter_layer_names=drafter_layer_names(attn, 'eagle'))
    from vllm_pd_spec.engine.offload import MultiConnectorWorker
    tier = OffloadSpec(CPUStore(), OffloadConfig(store_form='assert'))
    pd = PDPair('eagle', 3, model=attn, transport=t, cache_config=cache, dtype=torch.float64, kv_cache_config=kvc,
                decode_kw=dict(kv_transfer_config=KVTransferConfig(offload=tier)))
    assert isinstance(pd.D.worker, MultiConnectorWorker) and isinstance(pd.D.worker.workers[0], PDConnectorWorker)
    with pytest.raises(EngineDeadError) as dead: pd.generate([model_prompts('text-attn', 1, 45)[0]], 8)   # 44 + 1 + 3 = 48 > 2 hashed blocks
    assert isinstance(dead.value.__cause__, StoreAssertionError)   # the tracker's assertion kills D's engine core

def test_flagged_gdn_group_vetoes_the_tier(hybrid):
    p1, p2 = model_prompts('text-hybrid', 2, 140)
    hits = {}
    for name in ('fixed', '0.27.1'):
        drops = lambda groups: drop_group_ids(groups, 'mtp') if name == 'fixed' else legacy_drop_group_ids(groups, 'mtp')
        config = lambda kvc: OffloadConfig(drop_group_ids=drops(cache_groups(kvc, drafter_layer_names(hybrid, 'mtp'))))
        cfg, kvc, store, eng, tier = _tier(hybrid, 'mtp', config, chunk=64, own_group=True)
        prompt, out, hits[name] = _two_turns(eng, p1, p2[:10])
        assert out == LLMEngine(cfg, hybrid, dtype=torch.float64).generate([prompt], 6)[0]
    assert hits == {'fixed': 128, '0.27.1': 0}   # GDN states at the 64-token prefill chunk ends (64, 128): never two in a row

def test_path_rule_and_reconcile(hybrid):
    p = model_prompts('text-hybrid', 1, 70)[0]
    def probed(**switches):
        "An engine with `switches` after one request and the loss of every cached GDN state; its scheduler and a probe request."
        cfg, kvc, store, eng, tier = _tier(hybrid, 'eagle', OffloadConfig(retrieve=False), **switches)
        eng.generate([p], max_tokens=4)
        kvm = eng.scheduler.kv_cache_manager
        for (h, g), d in list(kvm.block_pool.cached_block_hash_to_block.items()):
            if g == 1: [kvm.block_pool._maybe_evict_cached_block(b) for b in list(d.values())]   # every GDN state gone
        return eng.scheduler, Request('p', p + [5], block_size=16)
    s, probe = probed()
    assert s._get_local_prefix_cache_hit(probe)[1:] == (0, False)                  # 0.33.0: no restoring connector
    s, probe = probed(connector_path='0.27.1')
    assert s._get_local_prefix_cache_hit(probe)[1:] == (64, True)                  # 0.27.1: any connector
    assert s._computed_tokens(probe)[1] == 0                                       # nothing loads: reconciled
    s, probe = probed(connector_path='0.27.1', reconcile_when_empty=False)
    assert s._computed_tokens(probe)[1] == 64                                      # the variant resumes at 64

def test_own_group_and_transfer_set(attn):
    cfg = make_config('mtp', 3, model=attn)
    layers = drafter_layer_names(attn, 'mtp')
    kvc = get_kv_cache_config_own_draft_group(cfg, layers)
    gs = cache_groups(kvc, layers)
    assert draft_group_ids(gs) == {1} and transfer_group_ids(reported_54926_layout(gs)) == {0}
    with pytest.raises(ValueError): OffloadConfig(store_form='x')
    w = TransferSetWorker('decode-0', LocalTransport(), {0})
    ModelRunner(make_config('mtp', 3, role='decode', model=attn), kvc, attn, worker=w, dtype=torch.float64)
    assert set(w._left_out) == set(layers) and set(w.transport.caches['decode-0']) == set(attn.target.attn_layers())

def test_state_slot_exchange():
    x = torch.arange(4.).view(4, 1)   # P with k_P = 3
    assert exchange_state_slots(x, 40, 16, 3, pairing='legacy')[1] == 1 and exchange_state_slots(x, 40, 16, 1)[1] == 1
    assert exchange_state_slots(x, 40, 16, 1, pairing='legacy') == (torch.tensor([2.]), 3)
    assert exchange_state_slots(x[:2], 40, 16, 3, pairing='legacy')[1] is None
    with pytest.raises(ValueError): exchange_state_slots(x, 40, 16, 1, mode='all')
    with pytest.raises(ValueError): exchange_state_slots(x, 40, 16, 1, pairing='nearest')
