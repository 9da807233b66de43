"""`vllm-pd-spec audit` against a real vLLM (`make test-vllm`): the verdicts on vLLM 0.33.0 (and 0.27.1).

Skips unless vLLM imports; run in the venv `make audit` builds (`.venv-vllm`)."""
import json, subprocess, sys
from pathlib import Path
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
    from vllm_pd_spec.audit.main import audit
    return {f.contract: f for f in audit()}

EXPECTED = {  # contract -> verdict, per vLLM version
    '0.33.0': {
        '1. lookahead: VllmConfig.num_prefill_lookahead_tokens': 'fixed',
        '1. lookahead consumer: sliding-window extra_retained_tokens': 'fixed',
        '1. lookahead consumer: scheduler num_prefill_lookahead': 'fixed',
        '1. lookahead consumer: model runner V2 next_prefill_tokens rows': 'fixed',
        '1. lookahead consumer: Scheduler._reserve_prefill_lookahead': 'fixed',
        '2. backoff: _prefill_backoff': 'fixed',
        '2. backoff: D-side remote prefill token count': 'fixed',
        '2. backoff: P-side truncation (twice, on vllm.v1.request.Request)': 'fixed',
        '3. ordering: #53514 prefix-hit replay (NixlPullConnectorScheduler)': 'fixed',
        '3. ordering: #53514 prefix-hit replay (NixlPushConnectorScheduler)': 'fixed',
        '3. ordering: #53514 replay through Scheduler.schedule (NixlConnector)': 'fixed',
        '4. slots: VllmConfig.num_lookahead_tokens': 'fixed',
        '4. slots: Scheduler.schedule effective lookahead (waiting requests)': 'differs',
        '5. rows: V1 GPUModelRunner num_decode_draft_tokens': 'differs',
        '5. rows: V2 MambaHybridModelState.prepare_attn': 'differs',
        '6. guard: _combine_sampled_and_draft_tokens_kernel': 'fixed',
        'connector: MooncakeConnectorScheduler': 'legacy',
        'connector: MoRIIOConnectorScheduler': 'legacy',
        'connector: NixlPullConnectorScheduler': 'fixed',
        'connector: NixlPushConnectorScheduler': 'fixed',
    },
    '0.27.1': {
        '1. lookahead: VllmConfig.num_prefill_lookahead_tokens': 'not present',
        '2. backoff: _prefill_backoff': 'not present',
        '2. backoff: D-side remote prefill token count': 'legacy',
        '2. backoff: P-side truncation (twice, on vllm.v1.request.Request)': 'legacy',
        '3. ordering: #53514 prefix-hit replay (NixlPullConnectorScheduler)': 'legacy',
        '3. ordering: #53514 prefix-hit replay (NixlPushConnectorScheduler)': 'legacy',
        '3. ordering: #53514 replay through Scheduler.schedule (NixlConnector)': 'legacy',
        '4. slots: Scheduler.__init__ num_lookahead_tokens': 'fixed',
        '5. rows: V1 GPUModelRunner num_decode_draft_tokens': 'fixed',
        '6. guard: _combine_sampled_and_draft_tokens_kernel': 'fixed',
        'connector: MooncakeConnectorScheduler': 'legacy',
        'connector: NixlPullConnectorScheduler': 'legacy',
        'connector: NixlPushConnectorScheduler': 'legacy',
    },
}

def _expected():
    v = _vllm().__version__
    if v not in EXPECTED: pytest.skip(f'no expected verdicts recorded for vLLM {v}')
    return v, EXPECTED[v]

def test_verdicts(findings):
    v, want = _expected()
    got = {c: findings[c].verdict if c in findings else 'missing row' for c in want}
    assert got == want, f'vLLM {v}'

def test_every_finding_is_backed(findings):
    for f in findings.values():
        assert f.verdict != 'error', (f.contract, f.note)
        if f.verdict in ('legacy', 'differs'): assert f.counterexample, f.contract
        if f.verdict != 'not present': assert f.cases > 0, f.contract

def test_ordering_replay_shows_the_crash(findings):
    v, _ = _expected()
    for c in ('3. ordering: #53514 prefix-hit replay (NixlPullConnectorScheduler)',
              '3. ordering: #53514 replay through Scheduler.schedule (NixlConnector)'):
        assert 'assert num_new_tokens > 0 fails' in findings[c].counterexample, c

def test_matches_the_saved_audit(findings):
    v, _ = _expected()
    from vllm_pd_spec.audit.main import saved_audit
    saved = {f['contract']: f for f in saved_audit(v)}
    assert {c: f['verdict'] for c, f in saved.items()} == {c: f.verdict for c, f in findings.items()}
    assert {c: f['counterexample'] for c, f in saved.items()} == {c: f.counterexample for c, f in findings.items()}

def test_cli_writes_json(tmp_path):
    _vllm()
    out = tmp_path / 'audit.json'
    r = subprocess.run([sys.executable, '-c', 'import sys; from vllm_pd_spec.cli import main; sys.exit(main(sys.argv[1:]))',
                        'audit', '--json', str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert all({'contract', 'location', 'verdict', 'cases', 'counterexample'} <= set(x) for x in rows)
    assert any(x.get('connector') for x in rows) and 'first counterexample' in r.stdout
