"Fix 3: truncate in `on_new_request`, before the prefix lookup."
import pytest
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

@given(cases, st.integers(1, 3))
def test_closed_forms_equal_the_hooks_run_in_order(c, attempts):
    assert legacy_schedule_num_new_tokens(*c, attempts=attempts) == simulate_num_new_tokens(*c, fixed=False, attempts=attempts)
    assert schedule_num_new_tokens(*c, attempts=attempts) == simulate_num_new_tokens(*c, attempts=attempts)
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

def test_any_prompt_length_in_constant_memory():
    "`explain --prompt-len 100000000000` must not build the prompt."
    N = 100_000_000_000
    assert legacy_schedule_num_new_tokens(N + 1, 16, N + 1, 1) == 0 and schedule_num_new_tokens(N + 1, 16, N + 1, 1) == 16
    assert truncated_length(N, 3) == N - 3 and legacy_assertion_fires(N + 1, 16, N + 1, 1)

@pytest.mark.parametrize('call,name,exc', [
    (lambda: local_prefix_hit(0, 5, 16), 'num_tokens', ValueError),
    (lambda: local_prefix_hit(10, -1, 16), 'prefix_hit', ValueError),
    (lambda: local_prefix_hit(10, 5, 0), 'block_size', ValueError),
    (lambda: schedule_num_new_tokens(10, 16, 5, 1.5), 'backoff', TypeError),
    (lambda: legacy_schedule_num_new_tokens('10', 16, 5, 1), 'num_prompt_tokens', TypeError),
    (lambda: schedule_num_new_tokens(10, 16, 5, 1, attempts=0), 'attempts', ValueError),
    (lambda: legacy_assertion_fires(10, 16, 5, -1), 'backoff', ValueError),
    (lambda: legacy_gives_zero(10, None, 5, 1), 'block_size', TypeError),
    (lambda: make_p_request(0), 'num_prompt_tokens', ValueError)])
def test_bad_arguments_are_named(call, name, exc):
    with pytest.raises(exc, match=name): call()

@given(st.integers(1, 500), st.integers(0, 8), st.booleans(), st.integers(1, 5))
def test_truncates_once(n, b, fixed, attempts):
    r = make_p_request(n)
    for _ in range(attempts):
        if fixed: on_new_request(r, b); get_num_new_matched_tokens(r, 0, b)
        else: legacy_on_new_request(r, b); legacy_get_num_new_matched_tokens(r, 0, b)
    assert r.num_prompt_tokens == len(r.prompt_token_ids) == truncated_length(n, b)

def test_p_side_loads_nothing_remotely():
    r = make_p_request(10)
    assert get_num_new_matched_tokens(r, 0, 1) == legacy_get_num_new_matched_tokens(r, 0, 1) == (0, False)
