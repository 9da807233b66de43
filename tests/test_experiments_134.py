"Experiments of fixes 1, 3 and 4: quick runs hold the fixed invariant, show the legacy consequence, and go through `reproduce`."
import importlib, json, shutil, subprocess, sys
from pathlib import Path
import pytest
from vllm_pd_spec.experiments.common import ExperimentResult

MODULES = {1: 'vllm_pd_spec.experiments.lookahead', 3: 'vllm_pd_spec.experiments.ordering',
           4: 'vllm_pd_spec.experiments.slots'}
# the fields every JSON object carries
FIELDS = {'fix', 'name', 'metric', 'legacy', 'fixed', 'standalone', 'seed_figure', 'invariant_holds',
          'legacy_consequence_seen', 'device', 'seconds', 'legacy_label', 'fixed_label'}

@pytest.fixture(scope='module')
def results():
    return {f: importlib.import_module(m).run(quick=True) for f, m in MODULES.items()}

@pytest.mark.parametrize('fix', sorted(MODULES))
def test_quick_run(results, fix):
    r = results[fix]
    assert isinstance(r, ExperimentResult) and r.fix == fix
    assert r.invariant_holds and r.rows and r.notes
    assert r.legacy_consequence_seen == (fix != 1)  # fix 1: no acceptance or output difference on text-attn
    if fix != 4: assert r.seed_figure is None  # the upstream reports give no figure for these
    else: assert 'no rate' in r.seed_figure and r.fixed == 0 < r.legacy and r.setup['quick']  # #42971/#43733: crashes and corruption, no rate

@pytest.mark.parametrize('fix', [1, 3])
def test_per_setting_rows(results, fix):
    "One row per setting for the results table, each with the legacy and the fixed figure."
    ps = results[fix].per_setting
    assert ps and all({'setting', 'legacy', 'fixed', 'standalone'} <= set(r) for r in ps)
    assert len({r['setting'] for r in ps}) == len(ps)

def test_fix1_no_acceptance_lost_and_outputs_kept(results):
    "text-attn: the 0.27.1 consumers change no output and no acceptance beyond noise; the sliding window's freed reads are legacy-only."
    rows = results[1].rows
    assert all(r['outputs_equal'] and r['legacy_lossless'] and r['fixed_lossless'] and not r['differs'] for r in rows if 'differs' in r)
    assert all(r['legacy_short_chunks'] == r['requests'] and r['fixed_short_chunks'] == 0 for r in rows if r['consumer'] == 'scheduler')
    assert all(r['fixed'] == 0 < r['legacy'] for r in rows if r['consumer'] == 'kv_cache_planner')
    assert next(r for r in rows if r['consumer'] == 'runner')['agree'].startswith('897 of 897')

def test_fix1_v0290_is_the_fixed_run(results):
    "0.29.0 (no #55055) gives every consumer the experiment exercises the fixed number: its figure is the fixed run's."
    r = results[1]
    assert all(x['v0290'] == x['fixed'] for x in r.rows)
    assert all(s['arms']['0.29.0 (no #55055)'] == s['arms']['0.34.0'] == s['fixed'] for s in r.per_setting)
    assert r.legacy_label.startswith('0.27.1') and r.fixed_label.startswith('0.34.0')

def test_fix1_v0290_figure_is_none_where_the_numbers_differ():
    "The 0.29.0 figure is not borrowed from the fixed run for a consumer whose 0.29.0 number differs (none measured here)."
    from vllm_pd_spec.config import SpeculativeConfig
    from vllm_pd_spec.experiments.lookahead import v0290_figure
    row = dict(consumer='scheduler', fixed=2.5)
    assert v0290_figure(row, SpeculativeConfig('mtp', 3, num_mtp_modules=3)) == 2.5
    import vllm_pd_spec.contracts.lookahead as L
    real = L.scheduler_prefill_lookahead_0290
    try:
        L.scheduler_prefill_lookahead_0290 = lambda spec: 1  # as if 0.29.0 had 0.27.1's scheduler
        assert v0290_figure(row, SpeculativeConfig('mtp', 3, num_mtp_modules=3)) is None
    finally: L.scheduler_prefill_lookahead_0290 = real

def test_fix3_deaths_lose_every_request_held(results):
    rows = results[3].rows
    assert all(r['fixed_deaths'] == r['fixed_lost'] == 0 for r in rows)
    assert sum(r['legacy_lost'] for r in rows if r['scenario'] == 'stream') > sum(r['legacy_deaths'] for r in rows if r['scenario'] == 'stream') > 0
    assert results[3].legacy > results[3].fixed == 0

@pytest.mark.parametrize('fix', sorted(MODULES))
def test_json_fields(results, fix):
    d = json.loads(json.dumps(results[fix].to_json(), default=str))
    assert FIELDS <= set(d)

def test_progress_bar_is_driven():
    "`run` asks for a bar and advances it to its total."
    class Bar:
        def __init__(self, total): self.total, self.n = total, 0
        def update(self, n=1): self.n += n
        def close(self): self.closed = True
    for m in MODULES.values():
        bars = []
        importlib.import_module(m).run(quick=True, progress=lambda t: bars.append(Bar(t)) or bars[-1])
        assert len(bars) == 1 and bars[0].n == bars[0].total > 0 and bars[0].closed

def test_fix3_engine_agrees_with_contract(results):
    assert all(r['agree'] == r['of'] for r in results[3].rows if 'agree' in r)

def test_fix4_stray_writes_reach_other_requests_only_in_legacy(results):
    "Legacy: DFlash writes past its allocation land in other requests' or cached blocks and change their drafts; fixed: none."
    rows = results[4].rows
    assert all(r['fixed_writes_outside'] == r['fixed_victims'] == 0 for r in rows)
    assert all(r['legacy_outputs_lossless'] and r['fixed_outputs_lossless'] for r in rows)
    assert sum(r['landed_other_request'] + r['landed_cached'] for r in rows) > 0
    # drafts change only in victims and in the writers themselves (a writer reads its stray entry back through the persistent
    # block table, where another request may have written since)
    assert all(not r['drafts_changed_not_victims'] and r['drafts_changed'] >= r['drafts_changed_victims'] for r in rows)
    assert results[4].per_setting and all({'setting', 'legacy', 'fixed', 'standalone'} <= set(x) for x in results[4].per_setting)

def test_fix4_three_seeds_with_paired_intervals(results):
    "Three seeds, each its own stream; the headline is the mean over seeds, with intervals per arm and for the difference."
    from vllm_pd_spec.experiments.slots import victims_summary
    r = results[4]
    assert sorted(x['seed'] for x in r.rows) == [0, 1, 2]
    s, = victims_summary(r.rows)
    assert s['seeds'] == 3 and r.legacy == s['legacy_victims'] == round(sum(s['per_seed_legacy']) / 3, 3) and r.fixed == 0
    assert s['diff'] == s['legacy_victims'] and s['diff_ci'] > 0 and r.arms['legacy - fixed']['k=3'] == dict(victims=s['diff'], ci=s['diff_ci'])

SCRIPT = shutil.which('vllm-pd-spec', path=str(Path(sys.executable).parent)) or shutil.which('vllm-pd-spec')

def test_reproduce_cli(results, reproduce_over):
    "The command over the quick runs above (the experiments are not run twice): one JSON object per fix, in order, labels filled in."
    d = reproduce_over(results, MODULES)
    assert isinstance(d, list) and [x['fix'] for x in d] == [1, 3, 4]
    assert all(FIELDS <= set(x) and x['invariant_holds'] and x['legacy_consequence_seen'] == (x['fix'] != 1) for x in d)
    labels = {x['fix']: (x['legacy_label'], x['fixed_label']) for x in d}
    assert labels[1][0].startswith('0.27.1') and labels[3] == ('0.27.1 (NIXL, Mooncake)', '0.34.0') and labels[4][0].startswith('0.22.0')
    assert all(f.startswith('0.34.0') for _, f in labels.values())  # fixed: the newest audited release

def test_reproduce_script(tmp_path):
    "The installed script end to end, in a fresh process, on the quickest experiment (fix 3: no model runs)."
    out = tmp_path/'r.json'
    r = subprocess.run([SCRIPT, 'reproduce', '--fix', '3', '--json', str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (x,) = json.loads(out.read_text())
    assert x['fix'] == 3 and FIELDS <= set(x) and x['invariant_holds'] and x['legacy_consequence_seen'] and x['device'] == 'cpu'
    assert (x['legacy_label'], x['fixed_label']) == ('0.27.1 (NIXL, Mooncake)', '0.34.0') and '| [3](95c_fix3_truncation_ordering.ipynb)' in r.stdout
