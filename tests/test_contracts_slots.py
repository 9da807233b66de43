"Fix 4: 0.33.0's slot count (k + 1 for DFlash and DSpark fill-in) and async-load rule, against 0.22.0's and the named variants."
import pytest
from hypothesis import given, find, strategies as st
from vllm_pd_spec.config import SpeculativeConfig, METHODS, EAGLE_FAMILY
from vllm_pd_spec.contracts.slots import *

specs = st.one_of(st.none(), st.builds(SpeculativeConfig, st.sampled_from(METHODS), st.integers(1, 16)))

@given(specs, st.booleans())
def test_num_lookahead_tokens_forms(spec, anchor):
    n, legacy, v0271 = num_lookahead_tokens(spec, anchor), legacy_num_lookahead_tokens(spec, anchor), num_lookahead_tokens_0271(spec, anchor)
    if spec is None or spec.method == 'ngram': assert n == legacy == v0271 == 0; return
    k = spec.num_speculative_tokens
    fill_in = spec.method == 'dflash' or (spec.method == 'dspark' and not anchor)
    assert n == k + fill_in and legacy == k and v0271 == k + (spec.method == 'dflash')

@given(st.integers(0, 20), st.booleans(), st.booleans(), st.integers(0, 100))
def test_effective_rules(n, load_async, eagle, computed):
    assert effective_lookahead_tokens(n, load_async) == (0 if load_async else n)
    assert legacy_effective_lookahead_tokens(n, computed) == (0 if computed == 0 else n)
    assert effective_lookahead_tokens_43733(n, load_async, eagle) == (0 if load_async and eagle else n)

def test_bad_arguments_name_the_argument():
    with pytest.raises(TypeError, match='spec'): num_lookahead_tokens('dflash')
    with pytest.raises(TypeError, match='sample_from_anchor'): num_lookahead_tokens(None, sample_from_anchor=1)
    with pytest.raises(ValueError, match='num_lookahead'): effective_lookahead_tokens(-1, False)
    with pytest.raises(TypeError, match='load_kv_async'): effective_lookahead_tokens(3, None)
    with pytest.raises(ValueError, match='num_computed'): legacy_effective_lookahead_tokens(3, 1.5)

@given(specs, st.integers(0, 4096), st.integers(1, 512), st.integers(1, 64), st.booleans(), st.booleans())
def test_fixed_slots_cover_every_write(spec, computed, new, B, samples, anchor):
    assert slots_cover_writes(spec, computed, new, B, samples, sample_from_anchor=anchor)

@given(st.integers(1, 16), st.integers(0, 4096), st.integers(1, 64))
def test_dflash_writes_k_plus_1_past_its_first_prefill(k, n, B):
    s = SpeculativeConfig('dflash', k)
    w = positions_written(0, n + 1, s)
    assert len(w) == n + 1 + k + 1 and w[-1] < slots_allocated(0, n + 1, step_lookahead_tokens(s, False), B)

@given(st.sampled_from(METHODS), st.integers(1, 16), st.integers(1, 4096), st.integers(1, 64))
def test_async_load_block_count_matches_for_every_drafter(method, k, loaded, B):
    d, p = async_load_block_counts(loaded, SpeculativeConfig(method, k), B)
    assert d == p

def test_43733_keeps_a_draft_models_slots_on_an_async_load():
    "A counterexample: #43733's `use_eagle` form gives a loading draft model more blocks than P ships."
    k, loaded, B = find(st.tuples(st.integers(1, 16), st.integers(1, 4096), st.integers(1, 64)),
                        lambda t: blocks_needed(t[1] + effective_lookahead_tokens_43733(t[0], True, False), t[2]) != blocks_needed(t[1], t[2]))
    assert k >= 1

def test_0271_leaves_dspark_fill_in_short():
    "A counterexample: 0.27.1's count leaves DSpark fill-in's last query without a slot."
    spec = SpeculativeConfig('dspark', 3)
    last_write = lambda c: positions_written(c, 4, spec, sample_from_anchor=False)[-1]
    c = find(st.integers(1, 4096), lambda c: last_write(c) >= slots_allocated(c, 4, num_lookahead_tokens_0271(spec), 16))
    assert last_write(c) < slots_allocated(c, 4, num_lookahead_tokens(spec, sample_from_anchor=False), 16)

def test_legacy_first_prefill_overflows():
    "A counterexample: the legacy rule leaves a first prefill's drafts without slots."
    spec, n, B = find(st.tuples(specs, st.integers(1, 512), st.integers(1, 64)),
                      lambda t: not legacy_slots_cover_writes(t[0], 0, t[1], t[2]))
    assert spec is not None

def test_legacy_dflash_overflows_in_decode():
    "A counterexample with lookahead slots present: DFlash's k reservation is one short."
    k, c, B = find(st.tuples(st.integers(1, 16), st.integers(1, 4096), st.integers(1, 64)),
                   lambda t: not legacy_slots_cover_writes(SpeculativeConfig('dflash', t[0]), t[1], 1 + t[0], t[2]))
    assert (c + 1 + k + k) % B == 0

def test_legacy_block_count_depends_on_num_computed():
    "A counterexample: the legacy rule ties the async-load block count to num_computed, not to the load."
    t = find(st.tuples(st.sampled_from(EAGLE_FAMILY), st.integers(1, 16), st.integers(1, 4096), st.integers(1, 64), st.integers(0, 4096)),
             lambda t: len(set(legacy_async_load_block_counts(t[2], SpeculativeConfig(t[0], t[1]), t[3], t[4]))) > 1)
    assert t[4] > 0
