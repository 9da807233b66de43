"Drafter groups: one derivation, never a recurrent-state group, the same for every consumer; D's drafter never reads unwritten KV."
import pytest
from hypothesis import given, find, strategies as st
from vllm_pd_spec.config import METHODS
from vllm_pd_spec.contracts.draft_groups import *

methods = st.sampled_from((None,) + METHODS)

@st.composite
def cache_group(draw, state_draft_layers=False):
    kind = draw(st.sampled_from(GROUP_KINDS))
    t = draw(st.integers(0, 6))
    d = draw(st.integers(0, 3)) if kind != 'mamba' or state_draft_layers else 0
    if t + d == 0: t = 1
    return CacheGroup(kind, t, d, draw(st.booleans()), draw(st.booleans()))

layouts = st.lists(cache_group(), min_size=1, max_size=8)
any_layouts = st.lists(cache_group(state_draft_layers=True), min_size=1, max_size=8)

@given(any_layouts, methods)
def test_drop_set_never_names_a_state_group(gs, m):
    for c in CONSUMERS: assert not any(gs[i].is_state for i in consumer_drop_group_ids(gs, m, c))

@given(any_layouts, methods)
def test_drop_set_is_the_draft_set_when_the_method_needs_it(gs, m):
    s = drop_group_ids(gs, m)
    assert s <= draft_group_ids(gs)
    assert bool(s) == (needs_block_drop(m) and any(g.num_draft_layers and not g.is_state for g in gs))

@given(any_layouts, methods)
def test_every_consumer_reads_one_set(gs, m):
    assert len({consumer_drop_group_ids(gs, m, c) for c in CONSUMERS}) == 1

@given(layouts, methods)
def test_033_offloading_equals_the_layer_derivation(gs, m):
    "0.33.0's offloading connector (no fallback) already has the fixed set when no state group holds drafter layers."
    assert consumer_drop_group_ids(gs, m, 'offloading', '0.33.0') == drop_group_ids(gs, m)

@given(layouts, methods)
def test_033_coordinator_differs_only_without_drafter_layers(gs, m):
    same = coordinator_drop_group_ids_0330(gs, m) == drop_group_ids(gs, m)
    assert same == (not needs_block_drop(m) or bool(draft_group_ids(gs)))

@given(any_layouts, methods, st.integers(1, 8))
def test_lookahead_hashes_drop_no_group(gs, m, L):
    "Where the hashes cover the drafter's read (`L > 0`), no consumer of the fixed or the 0.33.0 form drops a block."
    assert not any(consumer_drop_group_ids(gs, m, c, f, L) for c in CONSUMERS for f in ('fixed', '0.33.0'))
    assert drop_group_ids(gs, m, 0) == drop_group_ids(gs, m)   # L = 0: the legacy hashes, the drop as before

def test_legacy_drops_a_state_group():
    "A counterexample to invariant 1 in the 0.27.1 form, found rather than constructed."
    gs, m = find(st.tuples(layouts, methods),
                 lambda t: any(t[0][i].is_state for i in legacy_drop_group_ids(*t)))
    assert any(g.is_state for g in gs) and not any(g.is_eagle_group for g in gs)

def test_033_coordinator_drops_a_state_group_for_a_kv_sharing_drafter():
    gs = [CacheGroup('full_attention', 8), CacheGroup('mamba', 12)]   # the drafter's layers share the target's KV
    assert coordinator_drop_group_ids_0330(gs, 'mtp') == {0, 1} and drop_group_ids(gs, 'mtp') == set()

def test_dflash_and_dspark_take_no_drop():
    gs = [CacheGroup('full_attention', 8), CacheGroup('mamba', 12), CacheGroup('sliding_window', 0, 5)]
    for m in ('dflash', 'dspark'):
        assert drop_group_ids(gs, m) == set() and legacy_drop_group_ids(gs, m) == {0, 1, 2}

@given(any_layouts, st.booleans())
def test_decode_drafter_never_reads_unwritten_kv(gs, p_runs):
    for layout in (gs, reported_54926_layout(gs)):
        assert decode_draft_kv(layout, p_runs) in ('transferred', 'recomputed', 'not needed')

@given(any_layouts)
def test_default_layout_transfers_the_draft_groups(gs):
    gs = [CacheGroup(g.kind, g.num_target_layers, g.num_draft_layers, g.is_eagle_group) for g in gs]
    assert draft_group_ids(gs) <= transfer_group_ids(gs)
    assert decode_draft_kv(gs) in ('transferred', 'not needed')

def test_reported_layout_leaves_draft_kv_missing_without_recompute():
    gs = find(any_layouts, lambda gs: decode_draft_kv(reported_54926_layout(gs), recompute_missing=False) == 'missing')
    assert draft_group_ids(gs) and not draft_group_ids(gs) & transfer_group_ids(reported_54926_layout(gs))

def test_bad_input_is_named():
    with pytest.raises(ValueError, match='kind'): CacheGroup('gdn')
    with pytest.raises(ValueError, match='num_draft_layers'): CacheGroup('full_attention', 1, -1)
    with pytest.raises(ValueError, match='method'): drop_group_ids([CacheGroup('mamba')], 'medusa')
    with pytest.raises(ValueError, match='consumer'): consumer_drop_group_ids([CacheGroup('mamba')], 'mtp', 'nixl')

def test_sources_name_real_forms():
    import vllm_pd_spec.contracts.draft_groups as mod
    for form in mod.SOURCES: assert callable(getattr(mod, form.split('(')[0])), form
