"""`vllm-pd-spec audit` against a real vLLM (`make test-vllm`): the verdicts on vLLM 0.33.0 (and 0.27.1).

Skips where vLLM is not installed (an installed vLLM that fails to import fails); run in the venv `make audit` builds (`.venv-vllm`)."""
import json, subprocess, sys
from pathlib import Path
import pytest

pytestmark = pytest.mark.vllm

def _vllm():
    "The installed vLLM; a skip only where none is installed: an installed vLLM that fails to import fails the test."
    import importlib.util
    if importlib.util.find_spec('vllm') is None:
        pytest.skip('vLLM is not installed here: run `make test-vllm`, which installs it into .venv-vllm')
    import vllm, vllm.v1.request  # noqa: F401
    return vllm

@pytest.fixture(scope='module')
def findings():
    _vllm()
    from vllm_pd_spec.audit.main import audit
    return {f.contract: f for f in audit()}

EXPECTED = {  # contract -> verdict, per vLLM version (fixed: 0.33.0's behaviour, or ours for rows 7-11; legacy: 0.27.1's or the release before the fix)
    '0.33.0': {
        '1. lookahead: VllmConfig.num_prefill_lookahead_tokens': 'fixed',
        '1. lookahead consumer: sliding-window extra_retained_tokens': 'fixed',
        '1. lookahead consumer: scheduler num_prefill_lookahead': 'fixed',
        '1. lookahead consumer: model runner V2 next_prefill_tokens rows': 'fixed',
        '1. lookahead consumer: Scheduler._reserve_prefill_lookahead': 'fixed',
        '1. lookahead consumer: KV-cache coordinator publication': 'fixed',
        '2. backoff: _prefill_backoff': 'fixed',
        '2. backoff: D-side remote prefill token count': 'fixed',
        '2. backoff: P-side truncation (twice, on vllm.v1.request.Request)': 'fixed',
        '2. backoff: D first step, MTP re-prefill from the slot (0.33.0 backoff)': 'legacy',  # legacy = per-slot rows never reset
        '2. backoff: D first step, MTP re-prefill from the slot (0.27.1 backoff)': 'legacy',
        '3. ordering: #53514 prefix-hit replay (NixlPullConnectorScheduler)': 'fixed',
        '3. ordering: #53514 prefix-hit replay (NixlPushConnectorScheduler)': 'fixed',
        '3. ordering: #53514 replay through Scheduler.schedule (NixlConnector)': 'fixed',
        '4. slots: VllmConfig.num_lookahead_tokens': 'fixed',
        '4. slots: Scheduler.schedule effective lookahead (waiting requests)': 'fixed',
        '5. rows: V1 GPUModelRunner num_decode_draft_tokens': 'fixed',
        '5. rows: V2 MambaHybridModelState.prepare_attn': 'fixed',
        '6. guard: _combine_sampled_and_draft_tokens_kernel': 'fixed',
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
        '11. waiting queue: a landed load behind a request holding nothing': 'fixed',
        '11. waiting queue: async-load admission margin (#57104)': 'fixed',
        'connector: NixlPullConnectorScheduler': 'fixed',
        'connector: NixlPushConnectorScheduler': 'fixed',
        'connector: MooncakeConnectorScheduler': 'legacy',
        'connector: MoRIIOConnectorScheduler': 'legacy',
    },
    '0.27.1': {
        '1. lookahead: VllmConfig.num_prefill_lookahead_tokens': 'not present',
        '1. lookahead consumer: sliding-window extra_retained_tokens': 'not present',
        '1. lookahead consumer: scheduler num_prefill_lookahead': 'not present',
        '1. lookahead consumer: model runner V2 next_prefill_tokens rows': 'legacy',  # derives k if multi-module MTP else 1
        '1. lookahead consumer: Scheduler._reserve_prefill_lookahead': 'not present',
        '1. lookahead consumer: KV-cache coordinator publication': 'legacy',  # publishes every full block
        '2. backoff: _prefill_backoff': 'not present',
        '2. backoff: D-side remote prefill token count': 'legacy',
        '2. backoff: P-side truncation (twice, on vllm.v1.request.Request)': 'legacy',
        '2. backoff: D first step, MTP re-prefill from the slot (0.33.0 backoff)': 'not present',  # init_speculator never builds it
        '2. backoff: D first step, MTP re-prefill from the slot (0.27.1 backoff)': 'not present',
        '3. ordering: #53514 prefix-hit replay (NixlPullConnectorScheduler)': 'legacy',
        '3. ordering: #53514 prefix-hit replay (NixlPushConnectorScheduler)': 'legacy',
        '3. ordering: #53514 replay through Scheduler.schedule (NixlConnector)': 'legacy',
        '4. slots: Scheduler.__init__ num_lookahead_tokens': 'differs',  # matches the named variant 0.27.1 (no DSpark fill-in slot)
        '4. slots: Scheduler.schedule effective lookahead (waiting requests)': 'fixed',
        '5. rows: V1 GPUModelRunner num_decode_draft_tokens': 'legacy',
        '5. rows: V2 MambaHybridModelState.prepare_attn': 'legacy',
        '6. guard: _combine_sampled_and_draft_tokens_kernel': 'fixed',
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
        '11. waiting queue: a landed load behind a request holding nothing': 'fixed',
        '11. waiting queue: async-load admission margin (#57104)': 'legacy',
        'connector: NixlPullConnectorScheduler': 'legacy',
        'connector: NixlPushConnectorScheduler': 'legacy',
        'connector: MooncakeConnectorScheduler': 'legacy',
        'connector: MoRIIOConnectorScheduler': 'differs',
    },
}
PATCHED = ('connector: MooncakeConnectorScheduler', 'connector: MoRIIOConnectorScheduler')  # what the plugin fixes on 0.33.0

def _expected():
    v = _vllm().__version__
    if v not in EXPECTED: pytest.skip(f'no expected verdicts recorded for vLLM {v}')
    return v, EXPECTED[v]

def test_verdicts(findings):
    v, want = _expected()
    got = {c: findings[c].verdict if c in findings else 'missing row' for c in want}
    assert got == want, f'vLLM {v}'

def test_where_the_p_side_truncates(findings):
    "Found by running the hooks: 0.33.0 truncates in on_new_request, 0.27.1's NIXL in get_num_new_matched_tokens."
    v, _ = _expected()
    hook = {'0.33.0': 'on_new_request', '0.27.1': 'get_num_new_matched_tokens'}[v]
    for c in ('connector: NixlPullConnectorScheduler', '2. backoff: P-side truncation (twice, on vllm.v1.request.Request)'):
        assert f'truncates in: {hook};' in findings[c].note, findings[c].note

def test_with_plugin_only_the_patched_connectors_change(findings):
    "`audit --with-plugin`: Mooncake and MoRI-IO come out fixed on 0.33.0, every other row keeps its verdict; 0.27.1 is refused."
    v, _ = _expected()
    from vllm_pd_spec import plugin
    from vllm_pd_spec.audit.main import audit, saved_audit
    if v != '0.33.0':
        with pytest.raises(plugin.PluginRefused): plugin.apply()
        assert not plugin._applied
        return
    with plugin.applied():
        patched = {f.contract: f for f in audit()}
    changed = {c: (f.verdict, patched[c].verdict) for c, f in findings.items() if patched[c].verdict != f.verdict}
    assert changed == {c: ('legacy', 'fixed') for c in PATCHED}
    assert all('patched by vllm_pd_spec.plugin' in patched[c].note for c in PATCHED)
    assert {f['contract']: f['verdict'] for f in saved_audit(v, plugin=True)} == {c: f.verdict for c, f in patched.items()}

REPREFILL = {  # backoff rule -> k at which a new request on a reused slot re-prefills the previous occupant's inputs
    '0.33.0': {2: (-2,)},
    '0.27.1': {2: (-2,), 3: (-3, -2), 4: (-4, -3, -2)},
}

def test_speculator_reprefill_per_k_and_backoff(findings):
    "vLLM's own kernels, per k, model and backoff: the previous occupant's inputs on a reused slot, zeros on a fresh one, else none."
    v, _ = _expected()
    for label, want in REPREFILL.items():
        f = findings[f'2. backoff: D first step, MTP re-prefill from the slot ({label} backoff)']
        assert len(f.detail) == 16 and f.cases == 16, f.note
        for d in f.detail:
            pos = want.get(d['k'])
            if pos is None: assert (d['source'], d['positions']) == ('none', []), d
            else: assert (d['source'], tuple(d['positions'])) == ('previous occupant' if d['reused'] else 'zeros', pos), d
            assert d['padded'] == (d['k'] == 1 or pos is not None), d  # k = 1 pads too, with nothing to re-prefill
            # a second step rejecting every draft re-reads what the first cached: stale rows until k - 1 newer inputs push them out
            stale = ('previous occupant' if d['reused'] else 'zeros',) * (len(pos) - 1) if pos else ()
            assert tuple(d['second_step_sources']) == stale + ('own',) * (d['k'] - 1 - len(stale)), d
            assert tuple(d['second_step_positions']) == tuple(range(1 - d['k'], 0)), d
        assert ('init_speculator never builds' in f.note) == (v == '0.27.1')
        assert 'multi_module_mtp/speculator.py' in f.note and 'hands the last freed slot out first: True' in f.note

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
    r = subprocess.run([sys.executable, '-c', 'import sys; from vllm_pd_spec.cli import main; sys.exit(main(sys.argv[1:]))',
                        'audit', '--with-plugin', '--markdown'], capture_output=True, text=True)
    if _vllm().__version__ == '0.33.0': assert r.returncode == 0 and 'with vllm_pd_spec.plugin' in r.stdout, r.stderr[-2000:]
    else: assert r.returncode == 3 and 'nothing was patched' in r.stderr
