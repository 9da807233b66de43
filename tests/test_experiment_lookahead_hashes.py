"The lookahead-hash experiment: its registered verdicts on a small run, a mutation that turns them, the saved full run."
import pytest
from vllm_pd_spec.experiments import lookahead_hashes as X
from vllm_pd_spec.experiments.common import Arm, arms, load_run

@pytest.fixture(scope='module')
def small():
    return X.rows(models=('text-attn',), methods=('eagle',), connectors=X.CONNECTORS, shapes=('system-prompt',), ds=(0,),
                  num_readers=2, max_tokens=4)

def test_small_run_verdicts(small):
    v = X.verdicts(small)
    assert all(v[k] == 'yes' for k in ('lossless', 'invariant held', 'consequence seen', 'stale as the contract says', 'controls')), v

def test_stale_blocks_are_the_contracts_request_by_request(small):
    assert all(r['stale_blocks'] == r['contract_stale_blocks'] for r in small)
    assert any(r['stale_blocks'] for r in small if r['arm'] == 'neither' and r['connector'] == 'NixlConnector')

def test_moriio_runs_the_drop_in_both_releases(small):
    p = {(r['arm'], r['connector'], r['method']): (r['L'], r['drop']) for r in small}
    assert p[('0.34.0 (hashes)', 'MoRIIOConnector', 'eagle')] == p[('0.33.0 (drop)', 'MoRIIOConnector', 'eagle')] == (0, True)
    assert p[('0.34.0 (hashes)', 'NixlConnector', 'eagle')] == (1, False)

def test_mutation_turns_the_invariants_verdict():
    "The fixed arm built with ours' rule (neither hashes nor the drop) in place of 0.34.0's: the invariant's verdict is 'no'."
    mutant = arms(*(Arm(a.name, role=a.role, label=a.label, engine=dict(release='neither' if a.name == '0.34.0 (hashes)' else a.engine['release']))
                    for a in X.ARMS.values()))
    rs = X.rows(models=('text-attn',), methods=('eagle',), connectors=('NixlConnector',), shapes=('system-prompt',), ds=(0,),
                num_readers=2, max_tokens=4, arms_=mutant)
    assert X.verdicts(rs)['invariant held'].startswith('no'), X.verdicts(rs)

def test_saved_full_run_carries_what_the_page_reads():
    full = load_run('lookahead_hashes_full')
    assert full['setup']['full'] and set(full['setup']['arms']) == set(X.ARMS)
    for k in ('lossless', 'invariant held', 'consequence seen', 'stale as the contract says', 'controls'): assert full['verdicts'][k] == 'yes', full['verdicts']
    s = full['summary'][0]
    assert {'model', 'method', 'connector', 'shape', 'd', 'arm', 'L', 'drop', 'hit_tokens', 'stale_blocks', 'mismatches', 'acceptance',
            'd_hit_tokens', 'd_acceptance'} <= set(s)
    assert X.verdicts(full['rows']) == full['verdicts']
