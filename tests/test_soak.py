"The soak in the test suite: 2,000 requests through the in-process P/D pair with the full mix, nothing lost, wrong, leaked or grown."
import importlib.util, json, pytest
from vllm_pd_spec.experiments.soak import soak, format_report, verdict, FaultyLocal, FAULTS
from vllm_pd_spec.cli import main

def test_two_thousand_requests_in_process():
    "Nothing lost, wrong (corrupt-on-P included), leaked, held or grown."
    r = soak(2000, seed=0)
    assert r['requests'] == 2000 and not r['verdict'] and r['mismatched'] == 0, format_report(r)
    assert set(r['faults']) == set(FAULTS) and r['injected'] and r['recomputed_loads'] > 0  # every fault was met, loads recomputed
    assert r['aborted_p'] and r['aborted_d'] and r['orphaned'] and r['completed'] > 1500

def test_without_corrupt_on_p_every_output_matches():
    r = soak(600, seed=1, faults=tuple(f for f in FAULTS if f != 'corrupt_p'))
    assert not r['verdict'], format_report(r)

def test_corrupt_on_p_leaves_no_mismatch():
    "A request that hits P's prefix cache on a block changed after it was computed fails D's check too, and is recomputed."
    r = soak(600, seed=1, faults=('corrupt_p',), fault_rate=0.05, event_rate=0)
    assert r['mismatched'] == 0 and r['recomputed_loads'] > r['faults']['corrupt_p'], format_report(r)

@pytest.mark.skipif(importlib.util.find_spec('nixl') is None, reason='nixl is not installed')
def test_corrupt_on_p_leaves_no_mismatch_over_nixl():
    r = soak(400, seed=1, transport='nixl', faults=('corrupt_p',), fault_rate=0.2, event_rate=0)
    assert r['mismatched'] == 0 and r['recomputed_loads'] > r['faults']['corrupt_p'], format_report(r)

def test_the_verdict_fails_on_each_kind_of_trouble():
    ok = dict(engine_dead=None, lost=0, engine_aborted=0, mismatched=0, leaked_blocks=dict(P=0, D=0), held_transfers=0,
              rss_mib=dict(start=100, warm=200, end=219))
    assert verdict(ok) == []
    for k, v in (('lost', 1), ('mismatched', 2), ('leaked_blocks', dict(P=0, D=3)), ('held_transfers', 1), ('engine_dead', 'boom'),
                 ('rss_mib', dict(start=100, warm=200, end=221))):
        assert verdict(dict(ok, **{k: v})), k

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
    try: r = soak(60, seed=3, fault_rate=0, event_rate=0)
    finally: S.FaultyLocal = orig
    assert r['mismatched'] > 0 and r['verdict']

def test_cli_soak_exit_status_and_json(tmp_path, capsys):
    out = tmp_path / 'soak.json'
    assert main(['soak', '--requests', '40', '--json', str(out)]) == 0
    assert json.loads(out.read_text())['requests'] == 40 and 'PASS' in capsys.readouterr().out
    assert main(['soak', '--requests', '0']) == 2 and main(['soak', '--seconds', 'x']) == 2

@pytest.mark.skipif(importlib.util.find_spec('nixl') is None, reason='nixl is not installed')
def test_over_nixl():
    r = soak(150, seed=1, transport='nixl')
    assert not r['verdict'] and r['mismatched'] == 0, format_report(r)
