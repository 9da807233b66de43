"""The probes beyond the six against a real vLLM (`make test-vllm`): the verdicts on vLLM 0.33.0 (and 0.27.1).

Skips unless vLLM imports; run in the venv `make audit` builds (`.venv-vllm`)."""
import pytest
from test_audit_beyond import EXPECTED

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
    from vllm_pd_spec.audit.probes_beyond import run_beyond
    return {f.contract: f for f in run_beyond()}

def _expected():
    v = _vllm().__version__
    if v not in EXPECTED: pytest.skip(f'no expected verdicts recorded for vLLM {v}')
    return v, EXPECTED[v]

def test_verdicts(findings):
    v, want = _expected()
    assert {c: f.verdict for c, f in findings.items()} == want, f'vLLM {v}'

def test_every_finding_is_backed(findings):
    for f in findings.values():
        assert f.verdict != 'error', (f.contract, f.note)
        if f.verdict in ('legacy', 'differs'): assert f.counterexample, f.contract
        if f.verdict != 'not present': assert f.cases > 0, f.contract

def test_saved_findings_are_the_live_ones(findings):
    from vllm_pd_spec.audit.probes_beyond import saved_beyond
    v, _ = _expected()
    assert [(f['contract'], f['verdict'], f.get('counterexample')) for f in saved_beyond(v)] == \
           [(f.contract, f.verdict, f.counterexample) for f in findings.values()]

def test_coordinator_matches_our_named_033_form(findings):
    "On 0.33.0 the coordinator and the Mooncake store equal our `coordinator_drop_group_ids_0330` on every case."
    v, _ = _expected()
    if v != '0.33.0': pytest.skip('the named form is 0.33.0\'s')
    for c in ('7. draft groups: KVCacheCoordinator', '7. draft groups: MooncakeStoreCoordinator'):
        assert 'coordinator_drop_group_ids_0330' in findings[c].note
