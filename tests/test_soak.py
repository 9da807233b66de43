"The soak in the test suite: 2,000 requests through in-process P/D pairs of both text models, every drafter at k 1 to 4, with the full mix; the toy's soak; the verdict's checks; the command."
import importlib.util, json, pytest
from vllm_pd_spec.experiments.soak import soak, format_report, verdict, FaultyLocal, FAULTS, soak_configs
from vllm_pd_spec.cli import main

def test_two_thousand_text_model_requests_in_process():
    "Nothing lost, wrong, stranded, leaked, held or grown; every setting served; every fault met; D preempts and recomputes."
    r = soak(2000, seed=0, model='text', max_tokens=(1, 8))  # a short mix, to keep `make test` in its budget
    assert r['requests'] == 2000 and not r['verdict'] and r['mismatched'] == 0 and r['stranded'] == 0, format_report(r)
    assert set(r['coverage']) == {'/'.join(map(str, c)) for c in soak_configs('text')}, r['coverage']  # all 26 settings
    assert set(r['faults']) == set(FAULTS) and r['recomputed_loads'] > 0 and r['d_preemptions'] > 0
    assert r['aborted_p'] and r['aborted_d'] and r['orphaned'] and r['completed'] > 1500 and r['rss_mib']['warm']

def test_toy_soak_without_corrupt_on_p_every_output_matches():
    r = soak(600, seed=1, model='toy', faults=tuple(f for f in FAULTS if f != 'corrupt_p'))
    assert not r['verdict'], format_report(r)

def test_corrupt_on_p_leaves_no_mismatch():
    "A request that hits P's prefix cache on a block changed after it was computed fails D's check too, and is recomputed."
    r = soak(600, seed=1, model='toy', faults=('corrupt_p',), fault_rate=0.05, event_rate=0)
    assert r['mismatched'] == 0 and r['recomputed_loads'] > r['faults']['corrupt_p'], format_report(r)

@pytest.mark.skipif(importlib.util.find_spec('nixl') is None, reason='nixl is not installed')
def test_corrupt_on_p_leaves_no_mismatch_over_nixl():
    r = soak(400, seed=1, transport='nixl', model='toy', faults=('corrupt_p',), fault_rate=0.2, event_rate=0)
    assert r['mismatched'] == 0 and r['recomputed_loads'] > r['faults']['corrupt_p'], format_report(r)

OK = dict(engine_dead=None, stalled=None, lost=0, engine_aborted=0, stranded=0, mismatched=0, leaked_blocks=dict(P=0, D=0),
          held_transfers=0, rss_mib=dict(start=100, warm=200, end=219), setup=dict(watchdog=5000))

def test_the_verdict_fails_on_each_kind_of_trouble():
    assert verdict(OK) == []
    for k, v in (('lost', 1), ('mismatched', 2), ('leaked_blocks', dict(P=0, D=3)), ('held_transfers', 1), ('engine_dead', 'boom'),
                 ('stranded', 1), ('stalled', dict(setting='toy/None/0', in_flight=3)), ('rss_mib', dict(start=100, warm=200, end=221))):
        assert verdict(dict(OK, **{k: v})), k

def test_the_memory_check_cannot_be_skipped():
    "A run too short to measure memory after warm-up fails, saying why."
    assert any('memory not checked' in b for b in verdict(dict(OK, rss_mib=dict(start=100, end=120))))
    r = soak(20, seed=2, model='text', segment=20)  # one setting of 26 once: no warm-up
    assert r['rss_mib'].get('warm') is None and any('memory not checked' in b for b in r['verdict'])

def test_the_watchdog_stops_a_run_that_makes_no_progress():
    "D's reads never land (and never time out): no request ends, the watchdog stops the run and the verdict names it."
    class Stuck(FaultyLocal):
        def read_blocks(self, *a): return None
    import vllm_pd_spec.experiments.soak as S
    orig, S.FaultyLocal = S.FaultyLocal, Stuck
    try: r = soak(30, seed=3, model='toy', fault_rate=0, event_rate=0, watchdog=200, timeout_s=1e9, lease_s=1e9)
    finally: S.FaultyLocal = orig
    assert r['stalled'] and r['lost'] > 0 and any('watchdog' in b for b in r['verdict'])

def test_a_fault_the_soak_cannot_see_fails_it():
    "Corrupt bytes that pass the checksum (the digests taken after the change) must show up as mismatches."
    class Silent(FaultyLocal):
        def read_blocks(self, engine_id, request_id, local, remote_engine_id, remote_request_id, remote):
            rec = super().read_blocks(engine_id, request_id, local, remote_engine_id, remote_request_id, remote)
            if rec is not None and rec.error is None and rec.dst_digests:
                p, l = next(iter(rec.dst_digests))
                for parts in self.caches[engine_id].values():
                    for name, t in parts:
                        if name == p: t[l].view(-1)[0] += 1
            return rec
    import vllm_pd_spec.experiments.soak as S
    orig, S.FaultyLocal = S.FaultyLocal, Silent
    try: r = soak(60, seed=3, model='toy', fault_rate=0, event_rate=0)
    finally: S.FaultyLocal = orig
    assert r['mismatched'] > 0 and r['verdict']

def test_cli_soak_exit_status_json_and_save_checked_first(tmp_path, capsys, monkeypatch):
    out = tmp_path / 'soak.json'
    assert main(['soak', '--requests', '40', '--model', 'toy', '--json', str(out)]) == 0
    assert json.loads(out.read_text())['requests'] == 40 and 'PASS' in capsys.readouterr().out
    assert main(['soak', '--requests', '0']) == 2 and main(['soak', '--seconds', 'x']) == 2
    assert main(['soak', '--requests', '40', '--json', str(tmp_path / 'no' / 'r.json')]) == 2  # refused before the run
    assert '--json' in capsys.readouterr().err
    for bad in ('../x', '/tmp/x', 'a/b', 'x.json', ''):
        assert main(['soak', '--requests', '40', '--save', bad]) == 2, bad
    monkeypatch.chdir(tmp_path)  # no nbs/runs here: --save is refused, and no folder is made
    assert main(['soak', '--requests', '40', '--model', 'toy', '--save', 'x']) == 2 and not (tmp_path / 'nbs').exists()

@pytest.mark.skipif(importlib.util.find_spec('nixl') is None, reason='nixl is not installed')
def test_over_nixl():
    r = soak(150, seed=1, transport='nixl', model='toy')
    assert not r['verdict'] and r['mismatched'] == 0, format_report(r)

def test_the_oracle_computes_each_completed_request_once():
    "Every completed request is compared (none twice), in batches of at most `ORACLE_BATCH`; a request that never completes costs the oracle nothing."
    import vllm_pd_spec.experiments.soak as S
    seen, orig = [], S.Oracle.__call__
    def counting(self, name, requests):
        seen.append(list(requests)); return orig(self, name, requests)
    S.Oracle.__call__ = counting
    try: r = soak(300, seed=4, model='toy', segment=100)  # segments longer than a batch: batches fill mid-segment, the rest at its end
    finally: S.Oracle.__call__ = orig
    ids = [rid for batch in seen for rid in batch]
    assert len(ids) == len(set(ids)) == r['completed'] and not r['verdict'], format_report(r)
    assert max(map(len, seen)) == S.ORACLE_BATCH and min(map(len, seen)) < S.ORACLE_BATCH
