"""`vllm-pd-spec audit` against a real vLLM (`make test-vllm`, `make audit-old`): the live audit against the saved one.

The expected verdicts of a release are its saved audit (`vllm_pd_spec/data/audit_vllm_<version>.json`, written by
`make audit-release V=<version>`): data, not a table in this file. What must hold for every release is asserted here:
no `error` row, every verdict backed, the live audit equal to the saved one row for row, and what the plugin changes.
Skips where vLLM is not installed (an installed vLLM that fails to import fails); run in the venv `make test-vllm` builds."""
import json, subprocess, sys
import pytest

pytestmark = pytest.mark.vllm

def _vllm():
    "The installed vLLM; a skip only where none is installed: an installed vLLM that fails to import fails the test."
    import importlib.util
    if importlib.util.find_spec('vllm') is None:
        pytest.skip('vLLM is not installed here: run `make test-vllm`, which installs it into .venv-vllm-<version>')
    import vllm, vllm.v1.request  # noqa: F401
    return vllm

@pytest.fixture(scope='module')
def findings():
    _vllm()
    from vllm_pd_spec.audit.main import audit
    return {f.contract: f for f in audit()}

@pytest.fixture(scope='module')
def saved():
    "The saved audit of the installed release (a release without one fails: `make audit-release V=<version>` writes it)."
    from vllm_pd_spec.audit.main import saved_audit, saved_versions
    v = _vllm().__version__
    assert v in saved_versions(), f'no saved audit of vLLM {v}: run `make audit-release V={v}` and check it row by row'
    return {f['contract']: f for f in saved_audit(v)}

def test_no_error_rows(findings):
    "Every probe fits this release: an `error` row is the audit needing work, never a verdict about vLLM."
    assert not {c: f.note for c, f in findings.items() if f.verdict == 'error'}

def test_verdicts_are_the_saved_ones(findings, saved):
    assert {c: f.verdict for c, f in findings.items()} == {c: f['verdict'] for c, f in saved.items()}

def test_matches_the_saved_audit(findings, saved):
    assert {c: f.counterexample for c, f in findings.items()} == {c: f['counterexample'] for c, f in saved.items()}

def test_every_finding_is_backed(findings):
    for f in findings.values():
        if f.verdict in ('legacy', 'differs'): assert f.counterexample, f.contract
        if f.verdict != 'not present': assert f.cases > 0, f.contract
        assert 'raises ' not in (f.counterexample or ''), (f.contract, f.counterexample)

def test_where_the_p_side_truncates(findings, saved):
    "Found by running the hooks: the hook each connector truncates in is the one the saved audit recorded."
    import re
    hook = lambda note: (re.search(r'truncates in: ([\w ]+?)[;,]', note or '') or [None, None])[1]
    for c, f in findings.items():
        if hook(saved[c].get('note')): assert hook(f.note) == hook(saved[c]['note']), (c, f.note)

def test_with_plugin(findings):
    "`audit --with-plugin`: where the plugin knows the release only the patched connectors change (to the saved plugin audit); elsewhere it refuses."
    v = _vllm().__version__
    from vllm_pd_spec import plugin
    from vllm_pd_spec.audit.main import audit, saved_audit, saved_versions
    known = any(v in p.fingerprints for p in plugin.PATCHES)
    if not known:
        with pytest.raises(plugin.PluginRefused): plugin.apply()
        assert not plugin._applied
        return
    with plugin.applied() as names:
        patched = {f.contract: f for f in audit()}
    changed = {c: (f.verdict, patched[c].verdict) for c, f in findings.items() if patched[c].verdict != f.verdict}
    assert changed and set(changed) == {f'connector: {n}' for n in names} and all(n == 'fixed' for _, n in changed.values())
    assert all('patched by vllm_pd_spec.plugin' in patched[c].note for c in changed)
    assert {f['contract']: f['verdict'] for f in saved_audit(v, plugin=True)} == {c: f.verdict for c, f in patched.items()}

def test_speculator_reprefill_matches_the_saved_detail(findings, saved):
    "vLLM's own MTP kernels, per k, model and backoff: the same provenance and positions as the saved audit, case by case."
    rows = [c for c in findings if 'MTP re-prefill from the slot' in c]
    assert len(rows) == 2
    for c in rows:
        f = findings[c]
        assert len(f.detail) == 16 and f.cases == 16, f.note
        assert f.detail == saved[c]['detail'], c
        assert 'multi_module_mtp/speculator.py' in f.note and 'hands the last freed slot out first: True' in f.note

def test_ordering_replay_shows_the_crash(findings):
    "The replays name the assertion as the legacy answer (a case where the fixed and legacy forms part)."
    for c in ('3. ordering: #53514 prefix-hit replay (NixlPullConnectorScheduler)',
              '3. ordering: #53514 replay through Scheduler.schedule (NixlConnector)'):
        assert 'assert num_new_tokens > 0 fails' in findings[c].counterexample, c

def test_cli_writes_json(tmp_path):
    v = _vllm().__version__
    from vllm_pd_spec import plugin
    out = tmp_path / 'audit.json'
    r = subprocess.run([sys.executable, '-c', 'import sys; from vllm_pd_spec.cli import main; sys.exit(main(sys.argv[1:]))',
                        'audit', '--json', str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert all({'contract', 'location', 'verdict', 'cases', 'counterexample'} <= set(x) for x in rows)
    assert any(x.get('connector') for x in rows) and 'first counterexample' in r.stdout
    r = subprocess.run([sys.executable, '-c', 'import sys; from vllm_pd_spec.cli import main; sys.exit(main(sys.argv[1:]))',
                        'audit', '--with-plugin', '--markdown'], capture_output=True, text=True)
    if any(v in p.fingerprints for p in plugin.PATCHES): assert r.returncode == 0 and 'with vllm_pd_spec.plugin' in r.stdout, r.stderr[-2000:]
    else: assert r.returncode == 3 and 'nothing was patched' in r.stderr
