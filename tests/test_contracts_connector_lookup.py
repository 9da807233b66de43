"The connector path equals the plain path: no move with nothing loaded, no resume without a recurrent state, the drop by need."
import pytest
from hypothesis import given, find, strategies as st
from vllm_pd_spec.config import METHODS
from vllm_pd_spec.contracts.connector_lookup import *

@st.composite
def hits(draw):
    max_len = draw(st.integers(1, 5000))
    fa = draw(st.integers(0, max_len))
    S = draw(st.sets(st.integers(1, max_len), max_size=6))
    return fa, S, max_len

connectors = st.tuples(st.integers(0, 512), st.booleans(), st.booleans())   # external tokens, attached, restores

@given(hits(), connectors)
def test_nothing_loaded_means_the_plain_boundary(h, c):
    _, att, rs = c
    for fixed in (True, False):
        assert resume_boundary(*h, 0, att, rs, fixed) == (plain_hit(*h), True)

@given(hits(), connectors)
def test_fixed_never_resumes_without_a_recurrent_state(h, c):
    assert resume_boundary(*h, *c, fixed=True)[1]

@given(hits(), connectors)
def test_fixed_and_legacy_agree_for_connectors_that_restore_state(h, c):
    ext, att, _ = c
    assert resume_boundary(*h, ext, att, True, True) == resume_boundary(*h, ext, att, True, False)

def test_legacy_resumes_without_a_state():
    "A counterexample for 0.27.1's rule, found rather than constructed: a non-restoring connector brings tokens."
    h, c = find(st.tuples(hits(), connectors), lambda t: not resume_boundary(*t[0], *t[1], fixed=False)[1])
    assert c[0] > 0 and c[1] and not c[2]

def test_the_variant_without_reconcile_moves_the_boundary():
    h = find(hits(), lambda h: resume_boundary(*h, 0, True, True, True, reconcile_when_empty=False)[0] != plain_hit(*h))
    assert connector_path_hit(*h)[1]

@given(hits())
def test_plain_hit_is_a_common_point(h):
    fa, S, _ = h
    p = plain_hit(*h)
    assert p <= fa and (p == 0 or p in S)

@given(st.integers(0, 10**5), st.sampled_from((1, 4, 16, 256, 1600)), st.sampled_from((None,) + METHODS))
def test_drop_follows_the_method(p, B, m):
    fixed, legacy = next_turn_hit(p, B, m), next_turn_hit(p, B, m, fixed=False)
    assert fixed >= legacy and fixed % B == 0 and fixed <= max(p - 1, 0)
    if m not in ('dflash', 'dspark'): assert fixed == legacy

def test_dflash_loses_everything_between_one_and_two_blocks():
    p = find(st.integers(0, 10**4), lambda p: next_turn_hit(p, 16, 'dflash', fixed=False) == 0 < next_turn_hit(p, 16, 'dflash'))
    assert 16 < p < 32

@given(st.integers(1, 10**4), st.sampled_from((4, 16, 64)))
def test_checkpoint_is_a_block_boundary_within_the_prompt(n, B):
    for drop in (False, True):
        c = mamba_checkpoint_position(n, B, drop)
        assert c % B == 0 and 0 <= c < n

def test_bad_input_is_named():
    with pytest.raises(ValueError, match='fa_hit'): plain_hit(10, set(), 5)
    with pytest.raises(ValueError, match='state_boundaries'): plain_hit(1, {0}, 5)
    with pytest.raises(ValueError, match='num_external'): resume_boundary(1, set(), 5, -1)

def test_sources_name_real_forms():
    import vllm_pd_spec.contracts.connector_lookup as mod
    for form in mod.SOURCES: assert callable(getattr(mod, form.split('(')[0])), form

@given(st.integers(0, 10**5), st.sampled_from((1, 4, 16, 256)), st.sampled_from(('eagle', 'eagle3', 'mtp')), st.integers(1, 8))
def test_lookahead_hashes_replace_the_drop(p, B, m, L):
    "Under lookahead hashes nothing is dropped: the checkpoint leaves `L` tokens for its hash; never shorter than the drop's where `L <= B`."
    c = next_turn_hit(p, B, m, lookahead=L)
    assert c == mamba_checkpoint_position(p, B, False, L) and c % B == 0 and (c == 0 or c + L <= p)
    if L <= B: assert c >= next_turn_hit(p, B, m)
    assert next_turn_hit(p, B, m, fixed=False, lookahead=L) == c   # neither rule drops under the hashes

def test_the_drop_alone_misreads_a_hashing_deployment():
    "The form without `L` (a connector means the drop) is wrong for EAGLE behind a connector that hashes ahead: found."
    p = find(st.integers(0, 10**4), lambda p: next_turn_hit(p, 16, 'eagle') != next_turn_hit(p, 16, 'eagle', lookahead=1))
    assert next_turn_hit(p, 16, 'eagle', lookahead=1) == next_turn_hit(p, 16, 'eagle') + 16

def test_lookahead_is_checked():
    with pytest.raises(ValueError, match='^lookahead='): next_turn_hit(20, 16, 'eagle', lookahead=-1)
    with pytest.raises(ValueError, match='^lookahead='): mamba_checkpoint_position(20, 16, False, lookahead=1.5)
