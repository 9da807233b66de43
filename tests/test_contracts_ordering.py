"Fix 3: truncate in `on_new_request`, before the prefix lookup."
from hypothesis import given, find, strategies as st
from vllm_pd_spec.contracts.ordering import *

cases = st.tuples(st.integers(1, 5000), st.integers(1, 64), st.integers(0, 6000), st.integers(0, 8))

def test_issue_53514():
    "N + 1 = 33 prompt tokens, 16-token blocks, one-token Mamba backoff, the identical request cached."
    assert legacy_schedule_num_new_tokens(33, 16, 33, 1) == 0
    assert schedule_num_new_tokens(33, 16, 33, 1) > 0

@given(cases)
def test_fixed_order_always_has_work(c):
    assert schedule_num_new_tokens(*c) >= 1

@given(cases)
def test_closed_forms_equal_the_simulation(c):
    legacy = legacy_schedule_num_new_tokens(*c)
    assert (legacy <= 0) == legacy_assertion_fires(*c)
    assert (legacy == 0) == legacy_gives_zero(*c)

@given(st.integers(1, 100).flatmap(lambda B: st.tuples(st.just(B), st.integers(1, 50), st.integers(1, min(B, 8)))))
def test_second_identical_request_hits_zero(t):
    "Every block size has prompts that hit it: N - b a block boundary (b <= B), the identical request cached."
    B, m, b = t
    N = m * B + b
    assert legacy_gives_zero(N, B, N, b) and legacy_schedule_num_new_tokens(N, B, N, b) == 0

def test_legacy_order_finds_the_assertion():
    "A counterexample, found rather than constructed."
    c = find(cases, lambda c: legacy_schedule_num_new_tokens(*c) <= 0)
    assert legacy_assertion_fires(*c)

@given(st.integers(1, 500), st.integers(0, 8), st.booleans(), st.integers(1, 5))
def test_truncates_once(n, b, fixed, attempts):
    r = make_p_request(n)
    for _ in range(attempts):
        if fixed: on_new_request(r, b); get_num_new_matched_tokens(r, 0, b)
        else: legacy_on_new_request(r, b); legacy_get_num_new_matched_tokens(r, 0, b)
    assert r.num_prompt_tokens == len(r.prompt_token_ids) == (n - b if b and n > b else n)

def test_p_side_loads_nothing_remotely():
    r = make_p_request(10)
    assert get_num_new_matched_tokens(r, 0, 1) == legacy_get_num_new_matched_tokens(r, 0, 1) == (0, False)
