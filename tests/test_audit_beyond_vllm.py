"""The probes beyond the six against a real vLLM (`make test-vllm`): what `tests/test_audit_vllm.py` does not check.

Skips unless vLLM imports; run in the venv `make audit` builds (`.venv-vllm`)."""
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

def test_fourteen_rows_none_an_error(findings):
    assert len(findings) == 14 and all(c.split('.')[0] in ('7', '8', '9', '10') for c in findings)
    assert all(f.verdict != 'error' for f in findings.values()), {c: f.note for c, f in findings.items() if f.verdict == 'error'}

def test_saved_counterexamples_are_the_live_ones(findings):
    from vllm_pd_spec.audit.main import saved_audit
    saved = {f['contract']: f for f in saved_audit(_vllm().__version__) if f['contract'] in findings}
    assert {c: (f['verdict'], f.get('counterexample')) for c, f in saved.items()} == \
           {c: (f.verdict, f.counterexample) for c, f in findings.items()}

def test_coordinator_matches_our_named_033_form(findings):
    "On 0.33.0 the coordinator and the Mooncake store equal our `coordinator_drop_group_ids_0330` on every case."
    if _vllm().__version__ != '0.33.0': pytest.skip("the named form is 0.33.0's")
    for c in ('7. draft groups: KVCacheCoordinator', '7. draft groups: MooncakeStoreCoordinator'):
        assert 'coordinator_drop_group_ids_0330' in findings[c].note

@pytest.fixture(scope='module')
def waiting():
    _vllm()
    from vllm_pd_spec.audit.probes_beyond import probe_waiting_queue
    return {f.contract: f for f in probe_waiting_queue()}

def test_waiting_queue_on_the_real_scheduler(waiting):
    "0.33.0 serves every case (holders first, #57104's margin); 0.27.1 scans blocked loads first but stalls on #57104's pool."
    v = _vllm().__version__
    scan, margin = (waiting[c] for c in ('11. waiting queue: a landed load behind a request holding nothing',
                                          '11. waiting queue: async-load admission margin (#57104)'))
    assert scan.verdict == 'fixed' and scan.cases > 10 and margin.cases > 10
    assert margin.verdict == {'0.33.0': 'fixed', '0.27.1': 'legacy'}.get(v, margin.verdict)
    if v == '0.27.1': assert "vLLM 'stalls'" in margin.counterexample
