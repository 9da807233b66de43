"Draft tokens are never computed tokens: the connector's count, the store cursor and the load prune."
import pytest
from hypothesis import given, find, strategies as st
from vllm_pd_spec.contracts.draft_accounting import *

@st.composite
def requests(draw):
    P, B, k = draw(st.integers(1, 300)), draw(st.sampled_from((1, 4, 16, 64))), draw(st.integers(0, 6))
    pad = draw(st.booleans())
    acc = draw(st.lists(st.integers(0, k), max_size=40))
    first = P - 1 if pad else draw(st.integers(0, P - 1))
    return P, B, k, request_steps(P, B, k, acc, chunk=draw(st.sampled_from((1, 7, 16, 512))), first_computed=first, pad_first=pad)

def due(steps, B): return min(steps[-1].num_computed // B, steps[-1].num_hashed_blocks)

@given(st.integers(0, 10**6), st.integers(0, 64), st.integers(0, 64))
def test_count_is_computed_plus_scheduled_minus_drafts(c, s, spec):
    spec = min(spec, s)
    assert connector_num_tokens(c, s, spec) == c + s - spec <= legacy_connector_num_tokens(c, s, spec)

@given(requests())
def test_count_never_runs_past_the_real_tokens(r):
    P, B, k, steps = r
    for s in steps:
        assert connector_num_tokens(s.num_computed, s.num_scheduled, s.num_scheduled_spec) <= s.num_tokens

@given(requests())
def test_fixed_store_has_no_holes_and_never_asserts(r):
    P, B, k, steps = r
    run = run_store(steps, B)
    assert run.failed is None and run.stored == list(range(due(steps, B)))

@given(requests())
def test_no_step_stores_an_unhashed_block(r):
    P, B, k, steps = r
    for form in STORE_FORMS:
        run = run_store(steps, B, form)
        assert all(b < steps[i].num_hashed_blocks for b, i in zip(run.stored, run.at))
        assert len(set(run.stored)) == len(run.stored)

def test_legacy_cursor_leaves_a_hole():
    "A counterexample for the early offloading connector, found rather than constructed."
    P, B, k, steps = find(requests(), lambda r: bool(run_store(r[3], r[1], 'skip').holes(due(r[3], r[1]))))
    assert k > 0

def test_legacy_store_asserts():
    "The Mooncake store's tracker asserts when a padded first step's placeholders reach an unhashed block."
    P, B, k, steps = find(requests(), lambda r: run_store(r[3], r[1], 'assert').failed is not None)
    assert k > 0 and steps[0].num_scheduled_spec > 0

@given(requests())
def test_store_tracker_asserts_only_on_a_padded_first_step(r):
    P, B, k, steps = r
    if run_store(steps, B, 'assert').failed: assert steps[0].num_scheduled_spec and (P + k) // B > P // B

@given(requests())
def test_without_drafts_legacy_and_fixed_agree(r):
    "With no draft tokens scheduled the legacy count is exact: both forms store the same blocks."
    P, B, _, _ = r
    steps = request_steps(P, B, 0, [0] * 5)
    assert run_store(steps, B, 'skip').stored == run_store(steps, B, 'assert').stored == run_store(steps, B).stored

@given(st.integers(0, 10**5), st.booleans())
def test_prune_is_applied_once(n, drop):
    hit = lookup_hit_blocks(n, drop)
    assert load_blocks(hit, drop) == hit
    assert hit == (max(n - 1, 0) if drop else n)

def test_legacy_prune_leaves_a_claimed_block_unwritten():
    n = find(st.integers(0, 100), lambda n: legacy_load_blocks(lookup_hit_blocks(n, True), True) < lookup_hit_blocks(n, True))
    assert n >= 2

def test_bad_input_is_named():
    with pytest.raises(ValueError, match='num_scheduled_spec'): connector_num_tokens(0, 1, 2)
    with pytest.raises(ValueError, match='block_size'): storable_blocks(4, 0, 1)
    with pytest.raises(ValueError, match='accepted'): request_steps(4, 4, 1, [2])
    with pytest.raises(ValueError, match='form'): run_store([], 4, 'drop')

@given(requests())
def test_store_tracker_leaves_no_holes_when_it_does_not_assert(r):
    "The Mooncake store's tracker catches up with the real tokens: its only failure is the assertion."
    P, B, k, steps = r
    run = run_store(steps, B, 'assert')
    if run.failed is None: assert run.holes(due(steps, B)) == []

def test_sources_name_real_forms():
    import vllm_pd_spec.contracts.draft_accounting as mod
    for form in mod.SOURCES: assert callable(getattr(mod, form.split('(')[0])), form
