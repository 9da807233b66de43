"`explain` says which protection of the drafter's KV a deployment runs (lookahead block hashes, the drop, or neither), read from the saved audits."
import json
import pytest
from vllm_pd_spec.config import SpeculativeConfig
from vllm_pd_spec.contracts import lookahead_hashes as H
from vllm_pd_spec.explain import explain_deployment, format_deployment, protection_numbers, supported_releases, load_audit

ROW = '12. lookahead hashes: hash lookahead per connector'
PAGE = 'Lookahead block hashes'

def ask(release, connector=None, spec='{"method": "eagle", "num_speculative_tokens": 2}', role='kv_both', **kw):
    vllm = dict(speculative_config=spec)
    if connector: vllm['kv_transfer_config'] = json.dumps(dict(kv_connector=connector, kv_role=role))
    return explain_deployment(vllm, release=release, **kw)

def expected(release, connector, spec=SpeculativeConfig('eagle', 2), **sw):
    "What the saved audit's verdict says the release runs: the form it found, or the drop alone where the release has no lookahead hashes."
    v = next(f['verdict'] for f in load_audit(release) if f['contract'] == ROW)
    if v == 'not present': return 'drop'
    L, drop = H.protection(spec, connector, True, fixed=v == 'fixed', **sw)
    return f'hash L={L}' if L else 'drop' if drop else 'neither'

@pytest.mark.parametrize('release', supported_releases())
@pytest.mark.parametrize('connector', ['NixlConnector', 'MooncakeConnector', 'MoRIIOConnector', None])
def test_the_release_runs_what_its_audit_found(release, connector):
    r = ask(release, connector)
    assert r['protection']['runs'] == expected(release, connector)
    assert r['protection']['hashes_disabled'] == 'drop' and r['protection']['fixed'] == expected(supported_releases()[-1], connector)
    a = next(a for a in r['answers'] if a['page'] == PAGE)
    assert a['status'] == ('ok' if r['protection']['runs'] == r['protection']['fixed'] else 'affected')

def test_newest_release_behind_nixl_hashes_and_says_what_disabling_changes():
    r = ask(supported_releases()[-1], 'NixlConnector')
    assert r['protection']['runs'] == 'hash L=1'
    text = ' '.join(' '.join(format_deployment(r)).split())
    assert "a prefix hit's drafter KV (Lookahead block hashes): lookahead block hashes, L = 1; with " \
           'disable_lookahead_block_hashes: the trailing-block drop' in text

def test_a_release_that_drops_behind_nixl_is_told_to_upgrade():
    older = [v for v in supported_releases() if expected(v, 'NixlConnector') == 'drop']
    assert older
    for v in older:
        a = next(a for a in ask(v, 'NixlConnector')['answers'] if a['page'] == PAGE)
        assert a['status'] == 'affected' and a['do']['kind'] == 'upgrade' and 'fewer prefix-hit tokens' in a['sees'][0]

def test_multi_connector_and_the_switches():
    newest = supported_releases()[-1]
    kv = json.dumps(dict(kv_connector='MultiConnector', kv_role='kv_both', kv_connector_extra_config=dict(
        connectors=[dict(kv_connector='NixlConnector', kv_role='kv_both'), dict(kv_connector='OffloadingConnector', kv_role='kv_both')])))
    r = explain_deployment(dict(speculative_config='{"method": "mtp", "num_speculative_tokens": 3}', kv_transfer_config=kv),
                           release=newest, mtp_modules=3)
    assert r['protection']['runs'] == 'hash L=3'
    r = ask(newest, 'NixlConnector', spec='{"method": "eagle", "num_speculative_tokens": 2, "disable_lookahead_block_hashes": true}')
    assert r['protection']['runs'] == r['protection']['hashes_disabled'] == 'drop'
    assert 'disable_lookahead_block_hashes: the same' in ' '.join(' '.join(format_deployment(r)).split())
    r = ask(newest, 'NixlConnector', spec='{"method": "eagle", "num_speculative_tokens": 2, "disable_eagle_block_drop": true}')
    assert r['protection']['runs'] == 'neither'
    assert ask(newest, 'NixlConnector', spec='{"method": "dflash", "num_speculative_tokens": 2}')['protection']['runs'] == 'neither'

def test_connector_not_given_is_not_answered():
    r = explain_deployment(release=supported_releases()[-1], method='eagle', k=2)
    assert r['protection'] is None and "a prefix hit's drafter KV" not in ' '.join(format_deployment(r))

def test_bad_switch_names_the_flag():
    with pytest.raises(ValueError, match=r'^--explain-vllm-args --speculative-config: disable_eagle_block_drop=.* must be true or false'):
        ask(supported_releases()[-1], 'NixlConnector', spec='{"method": "eagle", "num_speculative_tokens": 2, "disable_eagle_block_drop": "yes"}')

def test_protection_numbers_are_the_contracts():
    f, l = protection_numbers(SpeculativeConfig('mtp', 3, 3), 'MooncakeConnector')
    assert (f['prefix_protection'], l['prefix_protection']) == ('hash L=3', 'drop')
