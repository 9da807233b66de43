"The lookahead-hash probes without vLLM: the cases, the registry, the saved rows of every release."
import importlib.util
import pytest
from vllm_pd_spec.audit.probes_hashes import *
from vllm_pd_spec.audit.harness import registered_probes
from vllm_pd_spec.audit.main import audit, saved_audit, saved_versions
from vllm_pd_spec.contracts import lookahead_hashes as H

def rows12(rows): return {r['contract']: r for r in rows if r['contract'].startswith('12.')}

def test_registered_after_the_contracts_beyond_the_six():
    ps = registered_probes()
    assert [p.fix for p in ps if p.__module__ == 'vllm_pd_spec.audit.probes_hashes'] == [12]
    assert max(p.fix for p in ps if p.fix is not None) == 12

def test_cases_cover_every_switch_and_kind_of_connector():
    cases = hash_cases(['NixlConnector', 'OffloadingConnector', 'MoRIIOConnector'])
    assert {c[2:] for c in cases} == set(SWITCHES) and SWITCHES[0] == (True, False, False)
    assert all(sum(a != b for a, b in zip(s, SWITCHES[0])) == 1 for s in SWITCHES[1:])   # each switch on its own
    conns = {c[1] for c in cases}
    assert None in conns and all(m in conns for m in MULTI)
    opting = {c for c in conns if c is not None and H.supports_lookahead_block_hashes(c)}
    assert opting and conns - opting - {None}   # both kinds, MultiConnectors included
    assert hash_cases(['MoRIIOConnector']) and ('MultiConnector', 'NixlConnector') not in {c[1] for c in hash_cases(['MoRIIOConnector'])}

def test_truncation_cases_cut_every_prompt():
    assert all(0 < b < n for n, b, _, _ in truncation_cases())
    assert {L for *_, L in truncation_cases()} == set(range(5))

def test_hit_cases_hold_each_protection():
    assert {(L > 0, d) for *_, L, d in hit_cases()} == {(False, True), (True, False), (False, False)}
    assert all(s <= n for s, n, *_ in hit_cases())

@pytest.mark.skipif(importlib.util.find_spec('vllm') is not None, reason='vLLM is installed: tests/test_audit_hashes_vllm.py runs the probes')
def test_without_vllm_every_row_is_not_present():
    rows = audit([probe_lookahead_hashes])
    assert rows and {f.verdict for f in rows} == {'not present'}

@pytest.mark.parametrize('version', saved_versions())
def test_saved_rows(version):
    "Every saved audit carries rows 12, none an error, each backed; a release without lookahead hashes has them all `not present`."
    rows = rows12(saved_audit(version))
    L = rows['12. lookahead hashes: hash lookahead per connector']
    assert {'12. lookahead hashes: Scheduler trailing-block drop', '12. lookahead hashes: prefix hit (KVCacheManager)'} <= set(rows)
    for f in rows.values():
        assert f['verdict'] != 'error', f['contract']
        if f['verdict'] in ('legacy', 'differs'): assert f['counterexample'], f['contract']
        if f['verdict'] != 'not present': assert f['cases'] > 0, f['contract']
    if L['verdict'] == 'not present': assert {f['verdict'] for f in rows.values()} == {'not present'}
    else: assert L['verdict'] in ('fixed', 'legacy') and any(c.startswith('12. lookahead hashes: P-side truncation (') for c in rows)

def test_the_newest_release_is_the_fixed_form():
    rows = rows12(saved_audit())
    assert all(f['verdict'] in ('fixed', 'not present') for f in rows.values()), {c: f['verdict'] for c, f in rows.items()}
    assert rows['12. lookahead hashes: hash lookahead per connector']['verdict'] == 'fixed'
