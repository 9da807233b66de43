"The probes beyond the six without vLLM: the source readers on toy functions, `not present` rows, the saved findings."
import importlib.util
import pytest
from vllm_pd_spec.audit.probes_beyond import *
from vllm_pd_spec.audit.probes_beyond import _ids

EXPECTED = {  # contract -> verdict, per vLLM version (shared with tests/test_audit_beyond_vllm.py)
    '0.33.0': {
        '7. draft groups: KVCacheCoordinator': 'differs',
        '7. draft groups: offloading SchedulerOffloadConfig.from_spec': 'fixed',
        '7. draft groups: MooncakeStoreCoordinator': 'differs',
        '7. draft groups: KVCacheConfig.transfer_group_ids': 'fixed',
        '8. state slots: NIXL get_exchange_clipped_blocks': 'fixed',
        '8. state slots: MoRI-IO split_block_groups': 'fixed',
        '9. draft accounting: Mooncake store new-request token count': 'legacy',
        '9. draft accounting: Mooncake store save length vs block hashes': 'legacy',
        '9. draft accounting: Mooncake store load mask (EAGLE prune once)': 'fixed',
        '9. draft accounting: offloading storable token count': 'fixed',
        '10. connector lookup: zero external tokens, connector path vs plain path': 'fixed',
        '10. connector lookup: who takes the per-group path': 'fixed',
        '10. connector lookup: last-block drop by method': 'fixed',
        "10. connector lookup: Mamba checkpoint (next turn's hit)": 'fixed',
    },
    '0.27.1': {
        '7. draft groups: KVCacheCoordinator': 'legacy',
        '7. draft groups: offloading SchedulerOffloadConfig.from_spec': 'legacy',
        '7. draft groups: MooncakeStoreCoordinator': 'legacy',
        '7. draft groups: KVCacheConfig.transfer_group_ids': 'not present',
        '8. state slots: NIXL get_exchange_clipped_blocks': 'fixed',
        '8. state slots: MoRI-IO split_block_groups': 'not present',
        '9. draft accounting: Mooncake store new-request token count': 'legacy',
        '9. draft accounting: Mooncake store save length vs block hashes': 'legacy',
        '9. draft accounting: Mooncake store load mask (EAGLE prune once)': 'fixed',
        '9. draft accounting: offloading storable token count': 'fixed',
        '10. connector lookup: zero external tokens, connector path vs plain path': 'fixed',
        '10. connector lookup: who takes the per-group path': 'legacy',
        '10. connector lookup: last-block drop by method': 'legacy',
        "10. connector lookup: Mamba checkpoint (next turn's hit)": 'not present',
    },
}

def toy(self, speculative_config, connector):
    self.use_eagle = False
    if speculative_config.use_eagle():
        self.use_eagle = True
    self.manager = KVCacheManager(use_eagle=self.use_eagle)  # noqa: F821
    n = 1
    n = connector.count + 2
    if connector is not None and connector.capable:
        return self.manager.get_computed_blocks_for_connector(n)

def test_source_readers():
    assert assigned_predicates(toy, 'self.use_eagle') == ['speculative_config.use_eagle()']
    assert keyword_of_call(toy, 'KVCacheManager', 'use_eagle') == 'self.use_eagle'
    assert assignments(toy, 'n') == ['1', 'connector.count + 2']
    assert guard_of_call(toy, 'get_computed_blocks_for_connector') == 'connector is not None and connector.capable'
    assert guard_of_call(toy, 'no_such_call') is None and fn_source(len) == ''

def test_matches_names_the_forms_that_agree():
    forms = {'double': lambda c: 2 * c, 'square': lambda c: c * c}
    assert matches(lambda c: 2 * c, [0, 1, 2], forms) == 'equals on every case: double'
    assert matches(lambda c: 2 * c, [0, 2], forms) == 'equals on every case: double, square'
    assert matches(lambda c: c, [1, 3], forms).startswith('equals on every case: none of')
    assert _ids({3, 1}) == (1, 3)

@pytest.mark.skipif(importlib.util.find_spec('vllm') is not None, reason='vLLM is installed: tests/test_audit_beyond_vllm.py runs the probes')
def test_without_vllm_every_row_is_not_present():
    findings = run_beyond()
    assert findings and {f.verdict for f in findings} == {'not present'}

def test_a_probe_that_raises_is_one_error_row():
    def probe_broken():
        "Broken: a probe that raises."
        raise RuntimeError('boom')
    (f,) = run_beyond((probe_broken,))
    assert f.verdict == 'error' and f.contract == 'Broken' and 'boom' in f.note

@pytest.mark.parametrize('version', sorted(EXPECTED))
def test_saved_findings(version):
    saved = saved_beyond(version)
    assert {f['contract']: f['verdict'] for f in saved} == EXPECTED[version]
    for f in saved:
        if f['verdict'] in ('legacy', 'differs'): assert f['counterexample'], f['contract']
        if f['verdict'] != 'not present': assert f['cases'] > 0, f['contract']
