"Fix 4: DFlash's k + 1 lookahead slots, withheld only for an eagle-family async load."
from hypothesis import given, find, strategies as st
from vllm_pd_spec.config import SpeculativeConfig, METHODS, EAGLE_FAMILY
from vllm_pd_spec.contracts.slots import *

specs = st.one_of(st.none(), st.builds(SpeculativeConfig, st.sampled_from(METHODS), st.integers(1, 16)))
@given(specs)
def test_num_lookahead_tokens(spec):
    n = num_lookahead_tokens(spec)
    if spec is None or spec.method == 'ngram': assert n == 0
    elif spec.method == 'dflash': assert n == spec.num_speculative_tokens + 1 == legacy_num_lookahead_tokens(spec) + 1
    else: assert n == spec.num_speculative_tokens == legacy_num_lookahead_tokens(spec)

@given(st.integers(0, 20), st.booleans(), st.booleans(), st.integers(0, 100))
def test_effective_rule(n, load_async, eagle, computed):
    assert effective_lookahead_tokens(n, load_async, eagle) == (0 if load_async and eagle else n)
    assert legacy_effective_lookahead_tokens(n, computed) == (0 if computed == 0 else n)

@given(specs, st.integers(0, 4096), st.integers(1, 512), st.integers(1, 64), st.booleans())
def test_fixed_slots_cover_every_write(spec, computed, new, B, samples):
    assert slots_cover_writes(spec, computed, new, B, samples)

@given(st.integers(1, 16), st.integers(0, 4096), st.integers(1, 64))
def test_dflash_writes_k_plus_1_past_its_first_prefill(k, n, B):
    s = SpeculativeConfig('dflash', k)
    w = positions_written(0, n + 1, s)
    assert len(w) == n + 1 + k + 1 and w[-1] < slots_allocated(0, n + 1, step_lookahead_tokens(s, False), B)

@given(st.sampled_from(EAGLE_FAMILY), st.integers(1, 16), st.integers(1, 4096), st.integers(1, 64))
def test_eagle_async_load_block_count_matches(method, k, loaded, B):
    d, p = async_load_block_counts(loaded, SpeculativeConfig(method, k), B)
    assert d == p

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
