"""The probes beyond the six against a real vLLM (`make test-vllm`): what `tests/test_audit_vllm.py` does not check.

Skips unless vLLM imports; run in the venv `make test-vllm` builds (`.venv-vllm-<version>`). What a release gives is its saved audit."""
import pytest

pytestmark = pytest.mark.vllm

def _vllm():
    try:
        import vllm, vllm.v1.request  # noqa: F401
        return vllm
    except Exception as e:
        pytest.skip(f'vLLM cannot be imported here ({type(e).__name__}): run `make test-vllm`, which installs it into .venv-vllm')

@pytest.fixture(scope='module')
def findings():
    _vllm()
    from vllm_pd_spec.audit.harness import registered_probes
    from vllm_pd_spec.audit.main import audit
    return {f.contract: f for f in audit([p for p in registered_probes() if p.fix in (7, 8, 9, 10)])}

def test_the_saved_rows_none_an_error(findings):
    "The live probes of contracts 7-10 give exactly the rows the release's saved audit holds, and none is an error."
    from vllm_pd_spec.audit.main import saved_audit
    saved = {f['contract'] for f in saved_audit(_vllm().__version__) if f['contract'].split('.')[0] in ('7', '8', '9', '10')}
    assert set(findings) == saved and len(findings) >= 14, sorted(set(findings) ^ saved)
    assert all(f.verdict != 'error' for f in findings.values()), {c: f.note for c, f in findings.items() if f.verdict == 'error'}

def test_saved_counterexamples_are_the_live_ones(findings):
    from vllm_pd_spec.audit.main import saved_audit
    saved = {f['contract']: f for f in saved_audit(_vllm().__version__) if f['contract'] in findings}
    assert {c: (f['verdict'], f.get('counterexample')) for c, f in saved.items()} == \
           {c: (f.verdict, f.counterexample) for c, f in findings.items()}

def test_coordinator_matches_the_named_form_the_saved_audit_names(findings):
    "The coordinator and the Mooncake store equal on every case the named form the saved audit recorded (0.33.0, 0.34.0: `coordinator_drop_group_ids_0330`)."
    import re
    from vllm_pd_spec.audit.main import saved_audit
    saved = {f['contract']: f for f in saved_audit(_vllm().__version__)}
    named = lambda note: re.findall(r'equals on every case: ([\w., ]+)', note or '')
    for c in ('7. draft groups: KVCacheCoordinator', '7. draft groups: MooncakeStoreCoordinator'):
        assert named(findings[c].note) == named(saved[c].get('note')), findings[c].note

@pytest.fixture(scope='module')
def waiting():
    _vllm()
    from vllm_pd_spec.audit.probes_beyond import probe_waiting_queue
    return {f.contract: f for f in probe_waiting_queue()}

def test_waiting_queue_on_the_real_scheduler(waiting):
    "The real scheduler on every case, as the saved audit has it (0.33.0 and 0.34.0 serve every case; 0.27.1 stalls on #57104's pool)."
    from vllm_pd_spec.audit.main import saved_audit
    saved = {f['contract']: f for f in saved_audit(_vllm().__version__)}
    scan, margin = (waiting[c] for c in ('11. waiting queue: a landed load behind a request holding nothing',
                                          '11. waiting queue: async-load admission margin (#57104)'))
    assert scan.verdict == 'fixed' and scan.cases > 10 and margin.cases > 10
    assert (margin.verdict, margin.counterexample) == (saved[margin.contract]['verdict'], saved[margin.contract]['counterexample'])
    if margin.verdict == 'legacy': assert "vLLM 'stalls'" in margin.counterexample
