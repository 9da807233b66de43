"Lookahead block hashes: a hit never reuses another continuation's drafter KV, hashes never hit less than the drop, truncation leaves no stale hash."
import pytest
from hypothesis import given, find, assume, strategies as st
from vllm_pd_spec.config import METHODS, SpeculativeConfig
from vllm_pd_spec.contracts.lookahead import num_prefill_lookahead_tokens
from vllm_pd_spec.contracts.draft_groups import needs_block_drop
from vllm_pd_spec.contracts.lookahead_hashes import *

specs = st.one_of(st.none(), st.builds(lambda m, k, mods: SpeculativeConfig(m, k, mods if m == 'mtp' else 1),
                                       st.sampled_from(METHODS), st.integers(1, 8), st.integers(1, 8)))
names = st.sampled_from(sorted(CONNECTORS))
connectors = st.one_of(st.none(), names, st.builds(lambda cs: ('MultiConnector', *cs), st.lists(names, max_size=3)))
switches = st.tuples(st.booleans(), st.booleans())   # prefix_caching, disable (lookahead hashes)

def need(spec): return num_prefill_lookahead_tokens(spec) if spec is not None and needs_block_drop(spec.method) else 0

@st.composite
def traffic(draw):
    B = draw(st.sampled_from((1, 2, 4, 8, 16, 64)))
    n = draw(st.integers(1, 40 * B))
    return draw(st.integers(0, n)), n, B   # shared, the reader's tokens, block size

@given(specs, connectors, switches, traffic(), st.booleans())
def test_no_hit_reuses_stale_drafter_kv(spec, conn, sw, t, fixed):
    shared, n, B = t
    L, drop = protection(spec, conn, *sw, fixed=fixed)
    assume(L > 0 or need(spec) <= B)   # the drop protects a lookahead of at most one block (see below)
    assert stale_blocks(shared, n, B, L, drop, need(spec)) == 0

def test_the_drop_protects_at_most_one_block_of_lookahead():
    "A counterexample, found: multi-module MTP reading further ahead than a block; the drop keeps a block whose lookahead diverged."
    spec = SpeculativeConfig('mtp', 4, 4)
    shared, n, B = find(traffic(), lambda t: stale_blocks(*t, 0, True, need(spec)) > 0)
    assert B < need(spec)
    assert stale_blocks(shared, n, B, *protection(spec, 'NixlConnector'), need(spec)) == 0   # 0.34.0's hashes cover it

def test_neither_protection_reuses_stale_kv():
    "The unprotected configuration (legacy hashes, no drop) breaks the invariant: found, right after a block boundary."
    spec = SpeculativeConfig('eagle', 3)
    shared, n, B = find(traffic(), lambda t: t[2] >= 4 and stale_blocks(*t, 0, False, need(spec)) > 0)
    assert shared % B == 0 and shared < n

@given(specs, connectors, switches, traffic())
def test_hashes_never_hit_less_than_the_drop(spec, conn, sw, t):
    L = num_prefill_lookahead_tokens(spec) if spec else 0
    shared, n, B = t
    assume(L <= B)
    assert hit_blocks(shared, n, B, L, False) >= hit_blocks(shared, n, B, 0, True)

def test_hashes_hit_more_when_the_prefix_runs_past_the_lookahead():
    shared, n, B = find(traffic(), lambda t: t[0] < t[1] - 1 and t[2] >= 4 and hit_blocks(*t, 1, False) > hit_blocks(*t, 0, True))
    assert shared % B >= 1   # the shared prefix runs at least L = 1 token past the boundary the drop gives back

@given(st.integers(1, 2000), st.integers(0, 8), st.sampled_from((1, 4, 16, 64)), st.integers(0, 8))
def test_truncation_leaves_no_stale_hash(n, b, B, L):
    assert stale_published_hashes(n, b, B, L) == 0
    if L == 0: assert stale_published_hashes(n, b, B, 0, truncate=False) == 0   # 0.33.0's connectors: nothing to invalidate

def test_without_truncation_a_hash_goes_stale():
    n, b, B, L = find(st.tuples(st.integers(1, 500), st.integers(1, 4), st.sampled_from((4, 16)), st.integers(1, 4)),
                      lambda t: stale_published_hashes(*t, truncate=False) > 0)
    assert any((j + 1) * B <= n - b < (j + 1) * B + L for j in range((n - b) // B))   # the cut within L after a block
    assert stale_published_hashes(n, b, B, L) == 0

@given(st.integers(0, 5000), st.sampled_from((1, 16, 64)), st.integers(0, 16))
def test_kept_hashes_cover_only_existing_tokens(n, B, L):
    kept = kept_block_hashes(n, B, L)
    assert kept * B + L <= n or kept == 0
    assert (kept + 1) * B + L > n

@given(specs, connectors, switches, st.booleans())
def test_releases_agree_without_a_connector(spec, conn, sw, disable_drop):
    args = (spec, None, *sw, disable_drop)
    assert hash_lookahead_tokens(*args) == legacy_hash_lookahead_tokens(*args)
    assert drops_trailing_block(*args) == legacy_drops_trailing_block(*args)

@given(specs, connectors, switches, st.booleans())
def test_releases_differ_only_for_eagle_style_behind_an_opting_connector(spec, conn, sw, disable_drop):
    args = (spec, conn, *sw, disable_drop)
    if hash_lookahead_tokens(*args) != legacy_hash_lookahead_tokens(*args):
        assert conn is not None and supports_lookahead_block_hashes(conn) and needs_block_drop(spec.method)
        assert not sw[1] and not disable_drop
        assert drops_trailing_block(*args) != legacy_drops_trailing_block(*args)

@given(specs, connectors, switches, st.booleans())
def test_exactly_one_protection_for_eagle_style_drafters(spec, conn, sw, disable_drop):
    for fixed in (True, False):
        L, drop = protection(spec, conn, *sw, disable_drop, fixed=fixed)
        if spec is None or not needs_block_drop(spec.method) or disable_drop: assert (L, drop) == (0, False)
        else: assert (L > 0) != drop

@pytest.mark.parametrize('bad', ['NixlConector', 'nixl', ('NixlConnector',), ('MultiConnector', None), 3])
def test_unknown_connectors_are_refused(bad):
    with pytest.raises(ValueError, match='^connector='):
        hash_lookahead_tokens(SpeculativeConfig('eagle', 1), bad)

@pytest.mark.parametrize('kw', [dict(prefix_caching='yes'), dict(disable=None), dict(disable_drop=1)])
def test_switches_must_be_booleans(kw):
    with pytest.raises(TypeError, match=f'^{next(iter(kw))}='):
        hash_lookahead_tokens(None, None, **kw)
