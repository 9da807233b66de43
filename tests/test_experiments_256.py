"Experiments of fixes 2, 5 and 6 on the real engine: small default runs hold the fixed invariant, show the legacy consequence, and go through `reproduce`."
import importlib, json
import pytest
from vllm_pd_spec.experiments.common import ExperimentResult

MODULES = {2: 'vllm_pd_spec.experiments.backoff', 5: 'vllm_pd_spec.experiments.rows',
           6: 'vllm_pd_spec.experiments.guard'}
FIELDS = {'fix', 'name', 'metric', 'legacy', 'fixed', 'standalone', 'seed_figure', 'invariant_holds',
          'legacy_consequence_seen', 'device', 'seconds'}

class Bar:
    def __init__(self, total): self.total, self.n = total, 0
    def update(self, n=1): self.n += n
    def close(self): self.closed = True

@pytest.fixture(scope='module')
def bars(): return {}

@pytest.fixture(scope='module')
def results(bars):
    out = {}
    for f, m in MODULES.items():
        bars[f] = []
        out[f] = importlib.import_module(m).run(quick=True, progress=lambda t, b=bars[f]: b.append(Bar(t)) or b[-1])
    return out

@pytest.mark.parametrize('fix', sorted(MODULES))
def test_quick_run(results, fix):
    r = results[fix]
    assert isinstance(r, ExperimentResult) and r.fix == fix
    assert r.invariant_holds, r.invariant
    if fix == 2:  # the flag is the paired interval's: legacy below standalone request by request, the interval excluding 0
        d = r.arms['legacy']['vs_standalone']
        assert r.legacy_consequence_seen == (d['mean'] + d['ci95'] < 0)
    else: assert r.legacy_consequence_seen
    assert r.rows and r.setup['quick'] and r.notes and r.seed_figure is not None
    assert r.run and (r.paired is None or {'mean', 'ci95', 'n', 'over'} == set(r.paired))

@pytest.mark.parametrize('fix', sorted(MODULES))
def test_progress_bar_is_driven(results, bars, fix):
    assert len(bars[fix]) == 1 and bars[fix][0].n == bars[fix][0].total > 0

@pytest.mark.parametrize('fix', sorted(MODULES))
def test_json_fields(results, fix):
    assert FIELDS <= set(json.loads(json.dumps(results[fix].to_json(), default=str)))

def test_fix2_arms(results):
    "Every arm on the same prompts: lossless; standalone and both hand-off arms clean; 0.33.0's backoff leaves taint; its invariant fails there."
    r = results[2]
    assert set(r.arms) == {'legacy', 'backoff', 'reset on add', 'handoff', 'backoff+handoff', 'standalone'} and r.model == 'text-attn' and r.k == 3
    keys = {'invariant', 'mean_acceptance_length', 'mean_acceptance_length_drafted', 'acceptance_by_step', 'per_position_acceptance',
            'tainted_entries', 'stale_reprefill_entries', 'lossless', 'label', 'ours', 'sources', 'fix_backoff', 'split_as_fixed'}
    for a in r.arms.values():
        assert keys <= set(a) and a['lossless'] and a['contract_matches_census'] and len(a['per_position_acceptance']) == r.k
        assert a['sources']['p_guesses'] + a['sources']['stale_reprefill'] == a['tainted_entries'] and len(a['acceptance_by_step']) == 16
    assert r.arms['standalone']['tainted_entries'] == r.arms['handoff']['tainted_entries'] == r.arms['backoff+handoff']['tainted_entries'] == 0
    # fix 2's invariant separates the arms: 0.33.0's backoff holds it with its guess-derived entries; legacy and the prototype drop
    # other counts and fail it
    assert r.arms['backoff']['tainted_entries'] > 0 and r.arms['backoff']['invariant'] and r.arms['reset on add']['invariant']
    assert not r.arms['legacy']['invariant'] and not r.arms['handoff']['invariant'] and r.arms['backoff+handoff']['invariant']
    assert r.arms['legacy']['sources']['stale_reprefill'] > 0 == r.arms['backoff']['sources']['stale_reprefill']
    assert r.invariant_holds and r.paired['n'] == r.setup['num_prompts'] > r.setup['max_num_seqs']  # more requests than D's slots
    assert r.arms['legacy']['stale_reprefill_entries'] > 0 and r.arms['reset on add']['stale_reprefill_entries'] == 0
    assert r.arms['backoff+handoff']['ours'] and r.arms['reset on add']['ours'] and not r.arms['handoff']['ours']
    assert r.arms['legacy']['label'] == r.setup['legacy_label'] == '0.27.1' and r.setup['fixed_label'] == '0.34.0 (NIXL)'
    assert (r.legacy, r.fixed, r.standalone) == tuple(r.arms[a]['mean_acceptance_length'] for a in ('legacy', 'backoff', 'standalone'))
    s, = r.per_setting
    assert s['setting'] == 'text-attn, MTP k=3' and s['arms'] == {a: x['mean_acceptance_length'] for a, x in r.arms.items()}
    assert s['drafted'] == dict(legacy=r.arms['legacy']['mean_acceptance_length_drafted'], fixed=r.arms['backoff']['mean_acceptance_length_drafted'])

def test_fix5_rules_per_setting(results):
    "0.33.0 keeps every P/D continuation equal to standalone; 0.27.1 and the 0.24.0 rule with padding do not; every row against 0.33.0 V2."
    r = results[5]
    assert all(x['exact_match_rate'] == 1.0 and x['wrong_path_rows'] == 0 for x in r.rows if x['arm'].startswith('0.33.0'))
    assert any(x['differing'] > 0 for x in r.rows if x['arm'] == '0.27.1') and r.legacy < r.fixed == 1.0
    assert {x['setting'] for x in r.per_setting} == {f"text-hybrid, MTP k={x['k']}, {x['setting']}: {x['label']}"
                                                     for x in r.rows if x['arm'] != '0.33.0 V2'}
    assert r.legacy_label.startswith('0.27.1 with MoRI-IO') and r.fixed_label.startswith('0.34.0')

def test_fix5_needs_the_padding(results):
    "The 0.24.0 rule fails with #45237's padding (main between #45237 and #47466); 0.24.0 as released, without it, does not."
    by = {(x['setting'], x['arm']): x for x in results[5].rows}
    assert by['ends by max_tokens', 'main #45237..#47466']['differing'] > 0 and by['ends by max_tokens', '0.24.0']['differing'] == 0
    assert not by['ends by max_tokens', '0.24.0']['padding'] and by['ends by max_tokens', 'main #45237..#47466']['padding']

def test_fix6_runs_through_the_interpreted_kernel(results):
    r = results[6]
    assert r.setup['backend'] == 'interpreter' and all(x['backend'] == 'interpreter' for x in r.rows)
    assert all(x['exact_match_rate'] == 1.0 for x in r.rows if x['arm'] == 'fixed')
    assert any(x['differing'] > 0 for x in r.rows if x['arm'] == 'legacy') and r.legacy < r.fixed == 1.0
    assert all(x['exact_match_rate'] == 1.0 for x in r.rows if x['arm'] == '0.24.0')  # no padding: the prefill exit, no loss
    assert r.legacy_label.startswith('main between #45237') and r.fixed_label == '0.34.0'

def test_first_decode_step_mechanism():
    "k=1: the one-token tail padded with a placeholder, run as a spec-decode row by every rule since #47466, not by 0.24.0."
    import torch
    from vllm_pd_spec.experiments.rows import first_decode_step
    from vllm_pd_spec.model.drafters import model_prompts
    from vllm_pd_spec.model.drafters import load_model
    m, p = load_model('text-hybrid', torch.float64), model_prompts('text-hybrid', 1, prompt_len=32)[0]
    s1, s3 = first_decode_step(1, p, m), first_decode_step(3, p, m)
    assert (s1['prompt_tokens_in_row'], s1['placeholders'], s3['prompt_tokens_in_row'], s3['placeholders']) == (1, 1, 2, 0)
    assert s1['0.24.0'] == -1 and s1['0.27.1'] == s1['0.33.0 V1'] == s1['0.33.0 V2'] == 1
    assert s3['0.24.0'] == s3['0.27.1'] == s3['0.33.0 V1'] == s3['0.33.0 V2'] == -1

def test_bad_device_and_transport():
    from vllm_pd_spec.experiments import backoff, rows, guard
    for m in (backoff, rows, guard):
        with pytest.raises(ValueError): m.run(device='tpu', quick=True)
        with pytest.raises(ValueError): m.run(transport='tcp', quick=True)

def _nixl():
    from vllm_pd_spec.engine.nixl_transport import nixl_status
    return nixl_status()

@pytest.mark.nixl
@pytest.mark.skipif(not _nixl()[0], reason=_nixl()[1])
def test_nixl_transport_gives_the_same_rows(results):
    "Over real NIXL transfers (one agent per engine, in process) every row equals the local transport's."
    for f in (2, 5):
        r = importlib.import_module(MODULES[f]).run(quick=True, transport='nixl')
        drop = lambda rows: [{k: v for k, v in x.items() if k != 'seconds'} for x in rows]  # fix 2's rows time each arm
        assert drop(r.rows) == drop(results[f].rows) and r.setup['transport'] == 'nixl'

def test_reproduce_cli(results, reproduce_over):
    "The command over the quick runs above (the experiments are not run twice): one JSON object per fix, in order, labels filled in."
    d = reproduce_over(results, MODULES)
    assert isinstance(d, list) and [x['fix'] for x in d] == [2, 5, 6]
    assert all(FIELDS <= set(x) and x['invariant_holds'] for x in d)
    assert all(x['legacy_consequence_seen'] for x in d if x['fix'] != 2)
    assert all(x['legacy_label'] and x['fixed_label'] for x in d)  # fix 2's from its result, else reproduce's default
    fix2 = d[0]
    assert {'arms', 'model', 'k', 'per_setting'} <= set(fix2) and set(fix2['arms']['backoff']) >= {
        'mean_acceptance_length', 'per_position_acceptance', 'tainted_entries', 'lossless'}
