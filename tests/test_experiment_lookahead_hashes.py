"The lookahead-hash experiment: its registered verdicts on a small run, a mutation that turns them, the saved full run."
import pytest
from vllm_pd_spec.experiments import lookahead_hashes as X
from vllm_pd_spec.experiments.common import Arm, arms, load_run

@pytest.fixture(scope='module')
def small():
    return X.rows(models=('text-attn',), methods=('eagle', 'dflash'), connectors=X.CONNECTORS, shapes=('system-prompt',), ds=(0,),
                  num_readers=2, max_tokens=8)

def test_small_run_verdicts(small):
    v = X.verdicts(small)
    assert all(v[k] == 'yes' for k in ('lossless', 'invariant held', 'consequence seen', 'stale as the contract says', 'controls')), v

def test_stale_blocks_are_the_contracts_request_by_request(small):
    assert all(r['stale_blocks'] == r['contract_stale_blocks'] for r in small)
    assert any(r['stale_blocks'] for r in small if r['arm'] == 'neither' and r['method'] == 'eagle')
    assert not any(r['stale_blocks'] for r in small if r['method'] == 'dflash')

def test_moriio_runs_the_drop_in_both_releases(small):
    p = {(r['arm'], r['connector'], r['method']): (r['L'], r['drop']) for r in small}
    assert p[('0.34.0 (hashes)', 'MoRIIOConnector', 'eagle')] == p[('0.33.0 (drop)', 'MoRIIOConnector', 'eagle')] == (0, True)
    assert p[('0.34.0 (hashes)', 'NixlConnector', 'eagle')] == (1, False)

@pytest.mark.parametrize('swap', ('neither', '0.33.0'))
def test_mutation_turns_a_verdict(swap):
    "The fixed arm built with another rule: 'neither' breaks the invariant; 0.33.0's loses the control that NIXL hashes (L = 0)."
    mutant = arms(*(Arm(a.name, role=a.role, label=a.label, engine=dict(release=swap if a.name == '0.34.0 (hashes)' else a.engine['release']))
                    for a in X.ARMS.values()))
    rs = X.rows(models=('text-attn',), methods=('eagle',), connectors=('NixlConnector',), shapes=('system-prompt',), ds=(0,) if swap == 'neither' else (1,),
                num_readers=2, max_tokens=4, arms_=mutant)
    v = X.verdicts(rs)
    if swap == 'neither': assert v['invariant held'].startswith('no'), v
    else: assert not v['hashes hit more'].startswith('yes'), v

def test_saved_full_run_carries_what_the_page_reads():
    full = load_run('lookahead_hashes_full')
    assert full['setup']['full'] and set(full['setup']['arms']) == set(X.ARMS)
    for k in ('lossless', 'invariant held', 'consequence seen', 'stale as the contract says', 'controls'): assert full['verdicts'][k] == 'yes', full['verdicts']
    s = full['summary'][0]
    assert {'model', 'method', 'connector', 'shape', 'd', 'arm', 'L', 'drop', 'hit_tokens', 'stale_blocks', 'mismatches', 'acceptance',
            'd_hit_tokens', 'd_acceptance'} <= set(s)
    assert X.verdicts(full['rows']) == full['verdicts']
