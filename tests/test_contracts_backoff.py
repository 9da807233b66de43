"Fix 2: the prefill backoff, the same on P and D."
from types import SimpleNamespace
from hypothesis import given, find, strategies as st
from vllm_pd_spec.config import make_kv_transfer_params
from vllm_pd_spec.contracts.backoff import *

def req(n, max_tokens=128, all_ids=True, **params):
    r = SimpleNamespace(prompt_token_ids=list(range(n)), num_prompt_tokens=n, max_tokens=max_tokens,
                        kv_transfer_params=make_kv_transfer_params(do_remote_decode=True, **params))
    if all_ids: r._all_token_ids = list(range(n))
    return r

def test_backoff_table():
    "The combinations #55055 lists."
    assert [prefill_backoff(m, L) for m, L in [(True, 3), (True, 1), (False, 3), (False, 1), (False, 0), (True, 0)]] \
        == [2, 1, 2, 0, 0, 1]

def test_upstream_prefix_d_side():
    "Pre-fix `test_mamba_n1_d_side`: a 10-token request loads 9 with Mamba, 10 without; the fixed form agrees at L <= 1."
    assert legacy_remote_prefill_token_count(10, True) == 9 and legacy_remote_prefill_token_count(10, False) == 10
    for mamba in (False, True):
        for L in (0, 1): assert remote_prefill_token_count(10, prefill_backoff(mamba, L)) == legacy_remote_prefill_token_count(10, mamba)

def test_upstream_p_side_truncation():
    "Pre-fix `test_mamba_n1_p_side_truncation`, on both forms."
    for trunc in (lambda r: truncate_request_for_prefill(r, prefill_backoff(True, 1)),
                  lambda r: legacy_truncate_request_for_prefill(r, True)):
        r = req(10)
        assert trunc(r) and r.num_prompt_tokens == len(r.prompt_token_ids) == 9 and r.max_tokens == 1
        assert r.kv_transfer_params['_p_side_truncated'] is True
        assert not trunc(r) and r.num_prompt_tokens == 9
    r = req(10)
    assert not legacy_truncate_request_for_prefill(r, False) and not truncate_request_for_prefill(r, prefill_backoff(False, 1))
    assert r.num_prompt_tokens == 10 and r.max_tokens == 128

@given(st.integers(1, 10_000), st.booleans(), st.integers(0, 16))
def test_p_drops_what_d_recomputes(n, mamba, L):
    shipped, dropped, recomputed = handoff_split(n, prefill_backoff(mamba, L))
    assert dropped == recomputed and shipped + recomputed == n

@given(st.integers(1, 10_000), st.booleans(), st.integers(0, 16))
def test_fixed_ships_no_draft_tainted_kv(n, mamba, L):
    b = prefill_backoff(mamba, L)
    if n > b: assert ships_clean_kv(n, L, mamba, b)

def test_legacy_ships_draft_tainted_kv():
    "A counterexample: the Mamba-only backoff ships KV derived from drafts."
    n, mamba, L = find(st.tuples(st.integers(1, 1000), st.booleans(), st.integers(0, 16)),
                       lambda t: t[0] > legacy_prefill_backoff(t[1], t[2]) and not ships_clean_kv(t[0], t[2], t[1], legacy_prefill_backoff(t[1], t[2])))
    assert L >= 2

@given(st.integers(0, 300), st.integers(0, 20), st.booleans(), st.booleans(), st.integers(1, 64))
def test_truncation(n, b, all_ids, marked, max_tokens):
    r = req(n, max_tokens, all_ids)
    if marked: r.kv_transfer_params['_p_side_truncated'] = True
    did = truncate_request_for_prefill(r, b)
    assert did == (b > 0 and not marked and n > b)
    m = n - b if did else n
    assert r.prompt_token_ids == list(range(m)) and r.num_prompt_tokens == m       # the tail goes, the head stays
    if all_ids: assert r._all_token_ids == list(range(m))
    assert r.max_tokens == (1 if did else max_tokens)
    assert not truncate_request_for_prefill(r, b) and r.num_prompt_tokens == m    # idempotent
    assert did == (n - remote_prefill_token_count(n, b) == b and not marked and b > 0)

def test_truncation_guards():
    r = req(10); r.kv_transfer_params = None
    assert not truncate_request_for_prefill(r, 2) and r.num_prompt_tokens == 10
    r = req(10); r._all_token_ids = r.prompt_token_ids                       # one list, not two
    assert truncate_request_for_prefill(r, 3) and r.prompt_token_ids == list(range(7))
    e = SimpleNamespace(prompt_token_ids=None, prompt_embeds=list('abcdefghij'), num_prompt_tokens=10, max_tokens=5,
                        kv_transfer_params=make_kv_transfer_params(do_remote_decode=True))
    assert truncate_request_for_prefill(e, 2) and e.prompt_embeds == list('abcdefgh') and e.num_prompt_tokens == 8
    none = SimpleNamespace(prompt_token_ids=None, num_prompt_tokens=10, max_tokens=5, kv_transfer_params={})
    assert not truncate_request_for_prefill(none, 2) and '_p_side_truncated' not in none.kv_transfer_params

def test_legacy_p_side_keeps_the_drafter_window():
    "A counterexample on P: after the legacy truncation P's prompt still reaches into the draft-tainted positions."
    def keeps(t):
        n, mamba, L = t
        r = req(n); legacy_truncate_request_for_prefill(r, mamba)
        return any(p < r.num_prompt_tokens for p in draft_tainted_positions(n, L))
    n, mamba, L = find(st.tuples(st.integers(2, 1000), st.booleans(), st.integers(0, 16)), keeps)
    assert L >= 2
    r = req(n); truncate_request_for_prefill(r, prefill_backoff(mamba, L))
    assert not any(p < r.num_prompt_tokens for p in draft_tainted_positions(n, L))   # the fixed form does not

def test_legacy_d_side_loads_tainted_positions():
    "A counterexample on D: the legacy count loads positions the drafter derived from drafts."
    n, mamba, L = find(st.tuples(st.integers(2, 1000), st.booleans(), st.integers(0, 16)),
                       lambda t: any(p < legacy_remote_prefill_token_count(t[0], t[1]) for p in draft_tainted_positions(t[0], t[2])))
    assert not any(p < remote_prefill_token_count(n, prefill_backoff(mamba, L)) for p in draft_tainted_positions(n, L))
