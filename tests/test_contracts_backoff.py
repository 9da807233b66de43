"Fix 2: the prefill backoff, the same on P and D, and where the drafter taint sits (the contract; the census is in test_experiment_backoff)."
from types import SimpleNamespace
import pytest
from hypothesis import given, find, strategies as st
from vllm_pd_spec.config import SpeculativeConfig, make_kv_transfer_params
from vllm_pd_spec.contracts.backoff import *

def req(n, max_tokens=128, all_ids=True, **params):
    r = SimpleNamespace(prompt_token_ids=list(range(n)), num_prompt_tokens=n, max_tokens=max_tokens,
                        kv_transfer_params=make_kv_transfer_params(do_remote_decode=True, **params))
    if all_ids: r._all_token_ids = list(range(n))
    return r

def test_backoff_table():
    "The combinations #55055 lists, and 0.33.0's bounded replay (at least 1)."
    assert [prefill_backoff(m, L) for m, L in [(True, 3), (True, 1), (False, 3), (False, 1), (False, 0), (True, 0)]] \
        == [2, 1, 2, 0, 0, 1]
    assert [prefill_backoff(False, L, bounded_replay=True) for L in (0, 1, 2, 3)] == [1, 1, 1, 2]

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

def test_prompt_logprob_requests_are_not_truncated():
    "0.33.0: a request that skips reading the prefix cache keeps its prompt (D recomputes all of it)."
    r = req(10); r.get_skip_reading_prefix_cache = lambda: True
    assert skips_prefix_cache(r) and not truncate_request_for_prefill(r, 3) and r.num_prompt_tokens == 10
    r = req(10, skip_reading_prefix_cache=False); r.skip_reading_prefix_cache = False
    assert not skips_prefix_cache(r) and truncate_request_for_prefill(r, 3)

def test_the_release_field_decides_the_skip():
    "0.34.0's `skip_reading_external_kv` (a bounded prefix-cache hit, prompt logprobs among them) is read first: its Request has no 0.33.0 method."
    r = req(10); r.skip_reading_external_kv = True
    assert skips_prefix_cache(r) and not truncate_request_for_prefill(r, 3) and r.num_prompt_tokens == 10
    r = req(10); r.skip_reading_external_kv = False; r.get_skip_reading_prefix_cache = lambda: True
    assert not skips_prefix_cache(r) and truncate_request_for_prefill(r, 3) and r.num_prompt_tokens == 7

@given(st.integers(1, 10_000), st.booleans(), st.integers(0, 16))
def test_p_drops_what_d_recomputes(n, mamba, L):
    shipped, dropped, recomputed = handoff_split(n, prefill_backoff(mamba, L))
    assert dropped == recomputed and shipped + recomputed == n

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
    if n: assert did == (n - remote_prefill_token_count(n, b) == b and not marked and b > 0)

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

@pytest.mark.parametrize('call, name', [
    (lambda: prefill_backoff(1, 3), 'has_mamba'), (lambda: prefill_backoff(False, -1), 'lookahead'),
    (lambda: prefill_backoff(False, 2, bounded_replay=None), 'bounded_replay'),
    (lambda: remote_prefill_token_count(0, 1), 'num_prompt_tokens'), (lambda: remote_prefill_token_count(10, 2.0), 'backoff'),
    (lambda: handoff_split(10, -1), 'backoff'), (lambda: truncate_request_for_prefill(req(10), '2'), 'backoff'),
    (lambda: draft_tainted_positions(10, -1, 2), 'num_modules'), (lambda: draft_tainted_positions(10, 3, 2, handoff_window=-1), 'handoff_window'),
    (lambda: draft_tainted_positions(10, 3, 2, num_matched=True), 'num_matched'), (lambda: tainted_entries(10, 3, 2, remote_backoff=1), 'remote_backoff'),
    (lambda: ships_clean_kv(10, 3, 'yes', 2), 'has_mamba'), (lambda: pr_account_tainted_positions(10, -2), 'lookahead'),
    (lambda: legacy_prefill_backoff(0), 'has_mamba'), (lambda: legacy_remote_prefill_token_count(0, True), 'num_prompt_tokens'),
])
def test_arguments_are_checked(call, name):
    with pytest.raises((TypeError, ValueError), match=name): call()

def test_closed_forms_at_any_length():
    "Nothing is materialised: a prompt of 10^11 tokens costs what one of 10 does."
    n = 10 ** 11
    assert handoff_split(n, 3) == (n - 3, 3, 3)
    assert tainted_entries(n, 4, 3) == 1 + 5 + 6 + 7 and len(draft_tainted_positions(n, 4, 3)[3]) == 7
    assert not ships_clean_kv(n, 4, False, 3) and ships_clean_kv(n, 4, False, 0, handoff_window=4)
    assert tainted_entries(n, 10 ** 9, 10 ** 9 - 1, num_matched=0) > 0   # a billion modules: closed form, no loop

def test_worked_example():
    "256 tokens, 3-module MTP, attention only, P's first guess wrong: 0.33.0's backoff leaves 10 entries; a hand-off none."
    assert draft_tainted_positions(256, 3, 2) == (range(253, 254), range(252, 256), range(251, 256))
    assert tainted_entries(256, 3, 0) == 0 + 1 + 3   # the legacy backoff (0): D recomputes the last token; modules 1-2 stay
    assert tainted_entries(256, 3, 0, num_matched=1) == 1  # greedy: P's sampled token is D's, its first draft is wrong
    assert tainted_entries(256, 3, 0, handoff_window=3) == tainted_entries(256, 3, 2, handoff_window=3) == 0

def slow_taint(N, m, b, w=0, e=0, b_d=None):
    "The taint propagated position by position, module by module: an independent reading of the contract's rule."
    b_d = b if b_d is None else b_d
    M, S = remote_prefill_token_count(N, b), remote_prefill_token_count(N, b_d)
    F = (S if S < N else N - 1)
    if w: F = min(F, max(0, M - w))
    tainted, prev = [], [False] * N  # module j-1's entries as D holds them
    for j in range(m):
        row, seen_prev = [], False
        for p in range(N):
            seen_prev = seen_prev or prev[p]          # module j at p attends to module j-1's entries up to p, through its input
            if p < F: row.append(p <= M - 1 and p + j + 1 >= M + e)   # kept from P: reads P's first wrong guess (or a later one)
            else: row.append(seen_prev and j > 0)     # computed on D: clean unless module j-1's context is stale
        tainted.append(row); prev = row
    return [[p for p in range(N) if row[p]] for row in tainted]

@given(st.integers(1, 60), st.integers(0, 5), st.integers(0, 8), st.integers(0, 6), st.integers(0, 6), st.integers(0, 3))
def test_contract_matches_the_propagation(N, m, b, w, e, extra):
    "`draft_tainted_positions` and `tainted_entries` agree with the position-by-position propagation."
    if remote_prefill_token_count(N, b + extra) > remote_prefill_token_count(N, b):  # D would load what P never computed
        with pytest.raises(ValueError, match='remote_backoff'): draft_tainted_positions(N, m, b, w, e, b + extra)
        return
    got = draft_tainted_positions(N, m, b, w, e, b + extra)
    assert [list(r) for r in got] == slow_taint(N, m, b, w, e, b + extra)
    assert tainted_entries(N, m, b, w, e, b + extra) == sum(map(len, got))

@given(st.integers(2, 10_000), st.integers(2, 8), st.booleans())
def test_backoff_moves_the_taint_a_handoff_removes_it(n, L, mamba):
    "With multi-module MTP and P's guess wrong, 0.33.0's backoff leaves taint; a hand-off of max(1, L) leaves none."
    b = prefill_backoff(mamba, L)
    if n > b + L:
        assert tainted_entries(n, L, b) > 0 and not ships_clean_kv(n, L, mamba, b)
        assert pr_account_ships_clean_kv(n, L, mamba, b)            # what the account says
        assert tainted_entries(n, L, b, remote_backoff=b + L) == 0  # or D recomputes L more than P drops (attention only)
    for bb in (0, b): assert tainted_entries(n, L, bb, handoff_window=max(1, L)) == 0

def test_legacy_ships_draft_tainted_kv():
    "A counterexample: the Mamba-only backoff ships KV derived from drafts."
    n, mamba, L = find(st.tuples(st.integers(1, 1000), st.booleans(), st.integers(0, 16)),
                       lambda t: t[0] > legacy_prefill_backoff(t[1], t[2]) and not ships_clean_kv(t[0], t[2], t[1], legacy_prefill_backoff(t[1], t[2])))
    assert L >= 1

def test_drafter_modules():
    assert drafter_modules(None) == 0 and drafter_modules(SpeculativeConfig('mtp', 3, num_mtp_modules=4)) == 3
    assert drafter_modules(SpeculativeConfig('mtp', 3)) == 1 and drafter_modules(SpeculativeConfig('eagle', 4)) == 1
    assert drafter_modules(SpeculativeConfig('dflash', 4)) == 0 and drafter_modules(SpeculativeConfig('ngram', 4)) == 0
