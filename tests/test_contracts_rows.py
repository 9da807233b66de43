"Fix 5: the named spec-decode row rules (0.24.0, 0.27.1, 0.33.0 V1 and V2) on every row the scheduler produces."
import numpy as np, pytest
from hypothesis import given, find, strategies as st
from vllm_pd_spec.contracts.rows import *

@st.composite
def reachable_rows(draw):
    "A row as the scheduler produces it: `(num_scheduled, num_draft, num_computed, num_prompt, k, path that keeps GDN right)`."
    n, k = draw(st.integers(2, 4096)), draw(st.integers(1, 8))
    kind = draw(st.sampled_from(['prefill', 'decode', 'decode_no_drafts', 'tail', 'padded_tail']))
    if kind == 'prefill':
        c = draw(st.integers(0, n - 1)); s = draw(st.integers(1, n - c)); return s, 0, c, n, k, 'either'
    if kind == 'decode':
        d = draw(st.integers(1, k)); return 1 + d, d, draw(st.integers(n, n + 4096)), n, k, 'spec'
    if kind == 'decode_no_drafts': return 1, 0, draw(st.integers(n, n + 4096)), n, k, 'spec'
    if kind == 'tail':
        b = draw(st.integers(1, min(n, 8))); return b, 0, n - b, n, k, 'either'
    return 1 + k, k, n - 1, n, k, 'spec'  # a one-token tail padded with k placeholder drafts

def _draft_count(rule, r):
    s, d, c, n, k, _ = r
    return int(num_decode_draft_tokens(rule, [s], [d], [c], [n], [n], k)[0])

@given(reachable_rows())
def test_0330_takes_the_right_path_on_every_row(r):
    for rule in ('0.33.0 V1', '0.33.0 V2'):
        v = _draft_count(rule, r)
        assert r[5] == 'either' or (v >= 0) == (r[5] == 'spec')
        assert v < 0 or v == r[1]

@given(reachable_rows())
def test_rules_agree_where_drafts_are_verified(r):
    if r[1] > 0 and r[2] >= r[3]: assert len({_draft_count(rule, r) for rule in ROW_RULES}) == 1

def test_0271_sends_a_draftless_decode_down_the_prefill_path():
    "A counterexample: 0.27.1 runs a decode step without drafts from the first state slot."
    r = find(reachable_rows(), lambda r: r[5] == 'spec' and _draft_count('0.27.1', r) < 0)
    assert r[0] == 1 and r[1] == 0 and r[2] >= r[3]

def test_0240_runs_a_padded_tail_through_the_prefill_kernels():
    "A counterexample: before #47466 the padded prompt tail is a prefill row."
    r = find(reachable_rows(), lambda r: r[1] > 0 and _draft_count('0.24.0', r) < 0)
    assert r[2] == r[3] - 1 and r[0] == r[1] + 1

@given(st.lists(reachable_rows(), max_size=64))
def test_vectorised_rules_are_row_wise(rows):
    a = np.array([r[:4] for r in rows], dtype=np.int64).reshape(-1, 4).T
    for rule in ROW_RULES:
        v = num_decode_draft_tokens(rule, *a, a[3], 3)
        assert v.dtype == np.int32 and v.tolist() == [int(num_decode_draft_tokens(rule, [x[0]], [x[1]], [x[2]], [x[3]], [x[3]], 3)[0]) for x in rows]

def test_fix_switch_and_scalar_forms():
    assert fixes_row_rule(True) == '0.33.0 V2' and fixes_row_rule(False) == '0.27.1'
    assert is_spec_decode_row(1, 0, 12, 10) and not legacy_is_spec_decode_row(1, 0)
    assert is_spec_decode_row(4, 3, 9, 10) and legacy_is_spec_decode_row(4, 3)

def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match='rule'): num_decode_draft_tokens('0.30.0', [1], [0], [1], [1], [1], 3)
    with pytest.raises(ValueError, match='num_draft'): num_decode_draft_tokens_0271([1, 2], [0])
    with pytest.raises(ValueError, match='num_computed'): num_decode_draft_tokens_v1_0330([1], [0], [[1]], [1])
    with pytest.raises(ValueError, match='num_speculative_tokens'): num_decode_draft_tokens_v2_0330([1], [0], [1], [1], -1)

def test_truth_table():
    tt = {r['row kind']: r for r in row_truth_table()}
    assert [k for k, r in tt.items() if not r['0.27.1 right']] == ['decode without drafts (budget left 1 token)']
    assert all(r['0.33.0 V1 right'] and r['0.33.0 V2 right'] for r in tt.values())
    assert tt['D-side one-token tail padded with 3 placeholders']['0.24.0'] == -1
