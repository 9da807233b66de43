"Fix 5: a spec-decode row has its whole prompt computed before the step."
import numpy as np
from hypothesis import given, find, strategies as st
from vllm_pd_spec.contracts.rows import *

@st.composite
def reachable_rows(draw, padded=False):
    "A row as the scheduler produces it: `(num_scheduled, num_draft, num_computed, num_prompt, kv_consumer_new, padded)`."
    n, k = draw(st.integers(1, 4096)), draw(st.integers(1, 8))
    kind = draw(st.sampled_from(['prefill', 'decode', 'd_tail'] + (['padded_tail'] if padded else [])))
    if kind == 'prefill':
        c = draw(st.integers(0, n - 1)); s = draw(st.integers(1, n - c))
        return s, 0, c, n, False, False
    if kind == 'decode':
        d = draw(st.integers(0, k)); return 1 + d, d, draw(st.integers(n, n + 4096)), n, False, False
    b = draw(st.integers(1, min(n, 8)))
    if kind == 'd_tail': return b, 0, n - b, n, True, False
    return 1 + k, k, n - 1, n, True, True  # a one-token tail padded with k placeholder drafts

@given(reachable_rows())
def test_fixed_spec_row_means_prompt_done(row):
    s, d, c, n, new, _ = row
    assert is_spec_decode_row(s, d) == (d > 0 and c >= n)

@given(reachable_rows(padded=True))
def test_by_state_rule(row):
    s, d, c, n, new, pad = row
    assert is_spec_decode_row_by_state(s, c, n, pad) == (c >= n or pad)

def test_legacy_finds_the_d_side_tail():
    "A counterexample: the legacy rule runs an unfinished prompt as a decode."
    s, d, c, n, new, _ = find(reachable_rows(), lambda r: legacy_is_spec_decode_row(r[2], r[3], r[4]) and r[2] < r[3])
    assert new and c < n

@given(st.lists(reachable_rows(padded=True), max_size=64))
def test_vectorised_forms_match_scalar(rows):
    a = np.array(rows, dtype=np.int64).reshape(-1, 6).T
    s, d, c, n, new, pad = a
    f = num_decode_draft_tokens(s, d)
    l = legacy_num_decode_draft_tokens(d, c, n, new.astype(bool))
    st_ = num_decode_draft_tokens_by_state(s, d, c, n, pad.astype(bool))
    for i, r in enumerate(rows):
        assert f[i] == (r[1] if is_spec_decode_row(r[0], r[1]) else -1)
        assert l[i] == (r[1] if legacy_is_spec_decode_row(r[2], r[3], r[4]) else -1)
        assert st_[i] == (r[1] if is_spec_decode_row_by_state(r[0], r[2], r[3], r[5]) else -1)
    assert f.dtype == l.dtype == st_.dtype == np.int32

def test_truth_table():
    tt = {name: rest for name, *rest in row_truth_table()}
    assert tt['D-side prompt tail after handoff'] == [False, False, True, False]
    assert tt['spec decode'] == [True, True, True, True]
    assert tt['middle prefill chunk'] == tt['one-token last prefill chunk'] == [False, False, False, False]
    assert tt['D-side tail padded with placeholder drafts'] == [False, True, True, True]
