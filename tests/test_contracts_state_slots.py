"Mamba state slots: both sides reduce to state-bearing slots before pairing, so D's running state is P's."
import pytest
from hypothesis import given, find, strategies as st
from vllm_pd_spec.contracts.state_slots import *

cases = st.tuples(st.integers(1, 4000), st.sampled_from((1, 4, 16, 64, 512)), st.integers(0, 8), st.integers(0, 8),
                  st.sampled_from(MAMBA_CACHE_MODES))

def lists(N, B, kp, kd, mode):
    return mamba_block_ids(N, B, kp, mode, 1), mamba_block_ids(N, B, kd, mode, 100_000)

def scratch(blocks, k): return set(blocks[len(blocks) - min(k, len(blocks) - 1):]) if k else set()

@given(cases)
def test_d_running_state_is_p_running_state(c):
    N, B, kp, kd, mode = c
    p, d = lists(*c)
    assert received_state(pair_state_slots(p, kp, d, kd, mode), p, kp, d, kd) == 'P state'

@given(cases)
def test_no_scratch_slot_and_no_null_is_paired(c):
    N, B, kp, kd, mode = c
    p, d = lists(*c)
    for a, b in pair_state_slots(p, kp, d, kd, mode):
        assert NULL_BLOCK not in (a, b) and a not in scratch(p, kp) and b not in scratch(d, kd)

@given(cases)
def test_all_mode_pairs_positions_one_to_one(c):
    N, B, kp, kd, _ = c
    p, d = lists(N, B, kp, kd, 'all')
    pairs = pair_state_slots(p, kp, d, kd, 'all')
    assert [p.index(a) for a, _ in pairs] == [d.index(b) for _, b in pairs] == list(range(-(-N // B)))

@given(cases)
def test_state_slots_keep_the_running_state(c):
    N, B, kp, _, mode = c
    p = mamba_block_ids(N, B, kp, mode)
    s = state_slots(p, kp, mode)
    assert s and s[-1] == running_state_slot(p, kp) and (len(s) == 1 or mode == 'all')

@given(cases)
def test_legacy_agrees_where_both_widths_are_equal(c):
    "Where P and D speculate with the same width, the legacy pairing also hands D the running state."
    N, B, k, _, mode = c
    p, d = lists(N, B, k, k, mode)
    assert received_state(legacy_pair_state_slots(p, k, d, k, mode), p, k, d, k) == 'P state'

@given(cases)
def test_legacy_never_hands_over_the_state_when_widths_differ(c):
    N, B, kp, kd, mode = c
    if kp == kd: kd += 1
    p, d = lists(N, B, kp, kd, mode)
    assert received_state(legacy_pair_state_slots(p, kp, d, kd, mode), p, kp, d, kd) != 'P state'

def test_legacy_counterexample_is_found():
    c = find(cases, lambda c: received_state(legacy_pair_state_slots(lists(*c)[0], c[2], lists(*c)[1], c[3], c[4]),
                                             lists(*c)[0], c[2], lists(*c)[1], c[3]) != 'P state')
    assert c[2] != c[3]

def test_harness_widths():
    "P with one draft token, D with three (vLLM's P/D acceptance harness): D keeps zeros under the legacy pairing."
    p, d = lists(40, 16, 1, 3, 'none')
    assert received_state(legacy_pair_state_slots(p, 1, d, 3), p, 1, d, 3) == 'D zeros'
    assert pair_state_slots(p, 1, d, 3) == [(p[0], d[0])]

def test_bad_input_is_named():
    with pytest.raises(ValueError, match='mode'): mamba_block_ids(4, 4, 0, 'dense')
    with pytest.raises(ValueError, match='num_speculative_blocks'): mamba_block_ids(4, 4, -1)
    assert state_slots([], 3) == []

def test_sources_name_real_forms():
    import vllm_pd_spec.contracts.state_slots as mod
    for form in mod.SOURCES: assert callable(getattr(mod, form.split('(')[0])), form
