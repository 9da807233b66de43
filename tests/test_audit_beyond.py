"The probes beyond the six without vLLM: the source readers on toy functions, `not present` rows, the registry, the saved rows."
import importlib.util
import pytest
from vllm_pd_spec.audit.probes_beyond import *
from vllm_pd_spec.audit.probes_beyond import _ids
from vllm_pd_spec.audit.harness import Finding, registered_probes
from vllm_pd_spec.audit.main import audit, saved_audit, saved_versions

BEYOND = ('7', '8', '9', '10', '11')
def beyond(rows): return [r for r in rows if (r['contract'] if isinstance(r, dict) else r.contract).split('.')[0] in BEYOND]

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

def test_registered_after_the_six():
    "The five aggregate probes are in the audit's registry, with fixes 7..11, after every probe of fixes 1..6."
    ps = registered_probes()
    mine = [(p.__name__, p.fix) for p in ps if p.__module__ == 'vllm_pd_spec.audit.probes_beyond']
    assert mine == [('probe_draft_groups', 7), ('probe_state_slots', 8), ('probe_draft_accounting', 9), ('probe_connector_lookup', 10),
                    ('probe_waiting_queue', 11)]
    fixes = [p.fix for p in ps if p.fix is not None]
    assert fixes == sorted(fixes) and max(f for f in fixes if f <= 6) == 6

@pytest.mark.skipif(importlib.util.find_spec('vllm') is not None, reason='vLLM is installed: tests/test_audit_vllm.py runs the probes')
def test_without_vllm_every_row_is_not_present():
    findings = beyond(audit([p for p in registered_probes() if p.fix in (7, 8, 9, 10, 11)]))
    assert findings and {f.verdict for f in findings} == {'not present'}

def test_a_probe_that_raises_is_one_error_row():
    def probe_broken():
        "Broken: a probe that raises."
        raise RuntimeError('boom')
    (f,) = audit([probe_broken])
    assert isinstance(f, Finding) and f.verdict == 'error' and f.contract == 'Broken' and 'boom' in f.note

@pytest.mark.parametrize('version', saved_versions())
def test_saved_findings(version):
    "Every saved audit carries rows 7-11, the same rows in every release (the verdicts are the release's data), each backed."
    saved = beyond(saved_audit(version))
    assert {f['contract'] for f in saved} == {f['contract'] for f in beyond(saved_audit())}
    assert {f['contract'].split('.')[0] for f in saved} == set(BEYOND)
    for f in saved:
        assert f['verdict'] != 'error', f['contract']
        if f['verdict'] in ('legacy', 'differs'): assert f['counterexample'], f['contract']
        if f['verdict'] != 'not present': assert f['cases'] > 0, f['contract']

def test_waiting_queue_forms_on_the_probe_cases():
    "Our forms on the probe's cases: the legacy scan stalls behind H, the legacy admission stalls on #57104's pool; the fixed forms never."
    scan, admission = waiting_cases()
    assert scan and admission and all(c[4] for c in scan) and not any(c[4] for c in admission)
    assert {waiting_case_forms(c, True) for c in scan + admission} == {'serves'}
    assert 'stalls' in {waiting_case_forms(c, False) for c in scan} and 'stalls' in {waiting_case_forms(c, False) for c in admission}
    assert waiting_case_forms((6, 32, 48, 1, 0), False) == 'stalls'
