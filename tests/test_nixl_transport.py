"""`NixlTransport` with real NIXL transfers: two agents in one process, then a P/D pair in two `spawn`ed
processes (lossless against standalone, no block held at the end), every injected fault survived by
recomputing, the wire format, and the throughput bench. Skips where `nixl` is not installed; an installed `nixl` that
cannot load fails."""
import importlib.util, inspect, pickle, random
import msgpack, pytest, torch
from vllm_pd_spec.engine import nixl_transport
from vllm_pd_spec.engine.nixl_transport import WireError, decode_metadata, decode_notice, decode_pub, encode_notice, encode_pub
from vllm_pd_spec.experiments import nixl_pd
from vllm_pd_spec.engine import toy_kv_runner

INSTALLED = importlib.util.find_spec('nixl') is not None
OK, WHY = nixl_transport.nixl_status()
needs_nixl = [pytest.mark.nixl, pytest.mark.skipif(not INSTALLED, reason='nixl is not installed '
                                                    '(install: pip install --no-deps nixl==1.5.1 nixl-cu13==1.5.1)')]
pytestmark = needs_nixl

def test_nixl_loads_where_installed():
    "An installed nixl that cannot load (a missing UCX backend, a broken wheel) is a failure, not a skip."
    assert OK, WHY

rng = random.Random(1)
PROMPTS = {f'q{i}': [rng.randrange(1, 50) for _ in range(rng.randrange(5, 26))] for i in range(4)}

@pytest.fixture(scope='module')
def ref(): return toy_kv_runner.run_standalone(PROMPTS)

def _pair():
    caches = lambda v: {'attn.0': (torch.full((6, 4, 2), v), torch.full((6, 4, 2), v)), 'eagle.0': torch.full((6, 4, 2), v)}
    P, D = nixl_transport.NixlTransport('p-t', timeout_s=2.0), nixl_transport.NixlTransport('d-t', timeout_s=2.0)
    pc, dc = caches(1.0), caches(0.0)
    P.register_kv_caches('p-t', pc, {'attn.0': 0, 'eagle.0': 1}); D.register_kv_caches('d-t', dc, {'attn.0': 0, 'eagle.0': 1})
    P.add_remote(D.metadata()); D.add_remote(P.metadata())
    return P, D, pc, dc

def _read(P, D, rid='r', local=([3, 0], [3, 4]), remote=([1, 2], [1, 2])):
    rec = None
    while rec is None: rec = D.read_blocks('d-t', rid, local, 'p-t', rid, remote); P.get_notifs('p-t')
    return rec

def test_in_process_read_maps_blocks_skips_null_and_moves_state():
    P, D, pc, dc = _pair()
    pc['eagle.0'][2] = 9.0
    P.send_blocks('p-t', 'r', ([1, 2], [1, 2]), states={'gdn': torch.arange(3.0)})
    rec = _read(P, D)
    assert D.verify(rec) and rec.num_blocks == 2 + 2  # attn K,V: one pair (null skipped); eagle: two pairs
    assert bool((dc['eagle.0'][4] == 9.0).all()) and bool((dc['attn.0'][0][0] == 0.0).all())  # null block untouched
    assert torch.equal(rec.states['gdn'], torch.arange(3.0))
    while P.published: P.get_notifs('p-t')
    assert not any(P.in_use().values()) and not any(D.in_use().values())
    P.close(); D.close()

def test_in_process_corruption_is_caught_by_checksum():
    P, D, pc, dc = _pair()
    P.faults['r'] = 'corrupt'
    P.send_blocks('p-t', 'r', ([1, 2], [1, 2]))
    rec = _read(P, D)
    assert rec.error == 'checksum' and not D.verify(rec) and D.stats['fault_checksum'] == 1
    P.close(); D.close()

def test_in_process_missing_publication_times_out():
    P, D, _, _ = _pair()
    D.timeout_s = 0.05
    rec = _read(P, D)
    assert rec.error == 'timeout' and not any(D.in_use().values())
    P.close(); D.close()

def test_pd_pair_over_nixl_is_lossless_and_leak_free(ref):
    res = nixl_pd.run_pd_nixl(PROMPTS)
    assert res['outputs'] == ref and res['exitcodes'] == (0, 0)
    for r in res['reports'].values():
        assert r['free_blocks'] == r['num_blocks'] - 1 and not any(r['in_use'].values())
    assert res['reports']['decode']['stats']['transfers'] == len(PROMPTS)
    assert res['reports']['prefill']['stats']['p_done'] == len(PROMPTS)

@pytest.mark.parametrize('fault,seen', [('fail', 'transfer_error'), ('timeout', 'timeout'), ('corrupt', 'checksum'), ('exit', None)])
def test_fault_is_survived_counted_and_leak_free(ref, fault, seen):
    r = nixl_pd.fault_run(fault, PROMPTS, 'q2', ref)
    assert r['lossless'] and r['d_leaks'] == 0 and r['recomputed'] >= 1
    if fault == 'exit': assert r['p_exit'] == 17 and r['p_leaks'] == 'exited' and sum(r['faults_seen'].values()) >= 1
    else: assert r['faults_seen'] == {seen: 1} and r['recomputed'] == 1 and r['p_leaks'] == 0

def _slow_build(role, transport, **kw):
    "An engine that takes seconds to build (a loaded machine)."
    import time; time.sleep(4); return toy_kv_runner.build_toy_engine(role, transport, **kw)

def _broken_build(role, transport, **kw): raise RuntimeError('this engine cannot be built')
def _stuck_build(role, transport, **kw): import time; time.sleep(600)

def test_engine_start_waits_while_the_process_lives_and_fails_at_once_when_it_exits(ref):
    "The proxy waits for a slow start as long as the engine's process lives (`start_s`); one that exits fails at once, naming it."
    import time
    assert nixl_pd.run_pd_nixl(PROMPTS, build=_slow_build, start_s=300)['outputs'] == ref
    t = time.monotonic()
    with pytest.raises(RuntimeError, match='prefill engine exited with status 1 before its handshake'):
        nixl_pd.run_pd_nixl(PROMPTS, build=_broken_build)  # legacy: EOFError, or 'an engine did not start' after 60 s
    assert time.monotonic() - t < 60
    with pytest.raises(TimeoutError, match='did not start within start_s=3 s'): nixl_pd.run_pd_nixl(PROMPTS, build=_stuck_build, start_s=3)

def test_bench_reports_positive_rates():
    rows = nixl_pd.bench_nixl((1, 2), reps=1)
    assert [r['mib'] for r in rows] == [1, 2]
    assert all(r[k] > 0 for r in rows for k in ('nixl_gbs', 'peer_copy_gbs', 'local_copy_gbs', 'nixl_over_peer'))
    for r in rows: assert abs(r['nixl_over_peer'] - r['peer_copy_gbs'] / r['nixl_gbs']) <= 0.02 * r['nixl_over_peer'] + 0.01
    assert len(nixl_pd.bench_table(rows).splitlines()) == 3

def test_real_model_pd_over_nixl_is_lossless_with_parity_and_survives_corruption():
    from vllm_pd_spec.model.data import make_prompts
    task = {f'req-{i}': e.prompt for i, e in enumerate(make_prompts(4, seed=7))}
    fixture = dict(method='mtp', model='tiny-hybrid')  # the Fibonacci fixture: its drafters are always right, so parity holds
    ref_out, ref_spec = nixl_pd.llm_standalone(task, max_tokens=6, **fixture)
    pd = nixl_pd.run_pd_nixl(task, max_tokens=6, build=nixl_pd.build_llm_engine, build_kw=fixture,
                        p_kw=dict(faults={'req-1': 'corrupt'}), d_kw=dict(timeout_s=120.0), deadline_s=240)  # no timeout on a busy machine
    rd = pd['reports']['decode']
    assert pd['outputs'] == ref_out  # lossless, float64, with one load recomputed
    assert rd['failures'] == [('req-1', 'checksum')] and rd['recomputed'] == 1 and rd['stats']['transfers'] == len(task) - 1
    assert pd['reports']['prefill']['stats']['p_crpt'] == 1  # P heard of it, and dropped the block from its prefix cache
    for r in pd['reports'].values(): assert r['free_blocks'] == r['num_blocks'] - 1 and not any(r['in_use'].values())
    pd2 = nixl_pd.run_pd_nixl(task, max_tokens=6, build=nixl_pd.build_llm_engine, build_kw=fixture, deadline_s=240)
    assert pd2['outputs'] == ref_out  # lossless
    spec = pd2['reports']['decode']['spec']  # parity: the same accepted drafts per position (vLLM's count adds D's padded steps, none accepted)
    assert spec['num_accepted_tokens_per_pos'] == ref_spec['num_accepted_tokens_per_pos'] and spec['num_drafts'] >= ref_spec['num_drafts']

def test_in_process_pdpair_over_nixlpair_equals_local_transport():
    from vllm_pd_spec.engine.llm_engine import PDPair
    from vllm_pd_spec.model.drafters import load_model
    from vllm_pd_spec.model.data import make_prompts
    m64 = load_model(dtype=torch.float64)
    prompts = [e.prompt for e in make_prompts(3, seed=11)]
    runs = {}
    for name, tr in (('local', None), ('nixl', nixl_transport.NixlPair())):
        pair = PDPair('dflash', model=m64, transport=tr, dtype=torch.float64)
        runs[name] = (pair.generate(prompts, max_tokens=6), dict(vars(pair.spec_stats)))
    assert runs['nixl'] == runs['local']  # same outputs and same acceptance counts
    assert tr.stats['decode-0']['transfers'] == len(prompts) and not any(any(u.values()) for u in tr.in_use().values())

def test_d_giving_up_before_p_publishes_still_frees_p_blocks():
    P, D, _, _ = _pair()
    D.faults['r'] = 'timeout'
    rec = D.read_blocks('d-t', 'r', ([3, 0], [3, 4]), 'p-t', 'r', ([1, 2], [1, 2]))
    assert rec.error == 'timeout'
    import time; t = time.monotonic()
    while not P._claimed and time.monotonic() - t < 5: P.get_notifs('p-t'); D._poll()  # D's agent must progress to send
    P.send_blocks('p-t', 'r', ([1, 2], [1, 2]))  # published after D gave up: released at once, no lease wait
    assert P.get_notifs('p-t') == {'r'} and not any(P.in_use().values())
    P.close(); D.close()

def test_more_requests_than_staging_slots():
    P, D, pc, dc = _pair()
    D.num_state_slots, D._free_slots = 1, [0]  # D reads states through one slot
    P.send_blocks('p-t', 'a', ([1, 2], [1, 2]), states={'gdn': torch.tensor([1.0])})
    P.send_blocks('p-t', 'b', ([3, 4], [3, 4]), states={'gdn': torch.tensor([2.0])})
    ra = rb = None
    while ra is None or rb is None:
        ra = ra or D.read_blocks('d-t', 'a', ([1, 0], [1, 2]), 'p-t', 'a', ([1, 2], [1, 2]))
        rb = rb or D.read_blocks('d-t', 'b', ([3, 0], [3, 4]), 'p-t', 'b', ([3, 4], [3, 4])); P.get_notifs('p-t')
    assert D.verify(ra) and D.verify(rb) and float(ra.states['gdn']) == 1.0 and float(rb.states['gdn']) == 2.0
    assert _wait(lambda: not P.published, P, D)
    P._free_slots = []  # every staging slot held: the publication waits (backpressure), P does not raise
    P.send_blocks('p-t', 'c', ([5], [5]), states={'gdn': torch.tensor([3.0])})
    assert P.in_use()['backlog'] == 1 and 'c' not in P.published  # nobody asked for it yet
    assert D.read_blocks('d-t', 'c', ([5], [5]), 'p-t', 'c', ([5], [5])) is None  # D asks: `want`
    assert _wait(lambda: P.stats['publish_waits'] >= 1, P, D) and 'c' not in P.published
    P._free_slots = [0]; P.get_notifs('p-t')  # a slot frees: the wanted publication goes out
    assert 'c' in P.published and P.in_use()['backlog'] == 0
    P.close(); D.close()

def test_p_publishes_what_d_reads_first():
    "Two staging slots, three requests with states: D reads the last first; P publishes it, not the two D has not asked for."
    P, D, _, _ = _pair()
    P.num_state_slots, P._free_slots = 2, [0, 1]
    for i, rid in enumerate('abc'): P.send_blocks('p-t', rid, ([i + 1], [i + 1]), states={'gdn': torch.tensor([float(i)])})
    rec = _read(P, D, 'c', ([4], [4]), ([3], [3]))
    assert D.verify(rec) and float(rec.states['gdn']) == 2.0 and set(P._backlog) == {'a', 'b'} and not P.published
    P.close(); D.close()

def test_heartbeats_keep_p_blocks_and_publications_are_bounded_in_bytes():
    "D's heartbeat renews P's lease of a request not read yet; D keeps at most `max_pending_bytes` of publications nobody read."
    import time
    P, D, _, _ = _pair()
    P.lease_s = 0.3
    P.send_blocks('p-t', 'a', ([1], [1]), states={'gdn': torch.tensor([1.0])})
    t = time.monotonic()
    while time.monotonic() - t < 0.6:
        D._beat_at.clear(); D.renew_leases('d-t', (('p-t', 'a'),)); _wait(lambda: False, P, D, 0.02); P.get_notifs('p-t')
    assert 'a' in P._backlog and P.stats['lease_expired'] == 0 and P.stats['p_beat'] > 0
    _wait(lambda: False, P, D, 0.5); P.get_notifs('p-t')
    assert not P._backlog and P.stats['lease_expired'] == 1  # no more heartbeats: the lease runs out
    P._publish('q0', ([1], [1]), None)
    assert _wait(lambda: D.pubs_in, P, D)
    D.max_pending_bytes = 2 * next(iter(D.pubs_in.values()))['nbytes'] + 1  # room for two
    for i in range(1, 6): P._publish(f'q{i}', ([1], [1]), None)
    assert _wait(lambda: D.stats['dropped_pubs'] == 4, P, D) and len(D.pubs_in) == 2 and D._pubs_in_bytes <= D.max_pending_bytes
    assert set(D.pubs_in) == {('p-t', 'q4'), ('p-t', 'q5')}  # the oldest went first
    P.close(); D.close()

def test_nixl_listens_on_loopback_unless_configured():
    "UCX's listening sockets are on 127.0.0.1 only (`UCX_NET_DEVICES=lo` by default), in a fresh process."
    import subprocess, sys, textwrap
    code = textwrap.dedent("""
        import os, torch
        from vllm_pd_spec.engine.nixl_transport import NixlPair
        t = NixlPair()
        for e in ('a', 'b'): t.register_kv_caches(e, {'x': torch.zeros(4, 8)}, {'x': 0})
        fds = set()
        for fd in os.listdir('/proc/self/fd'):
            try: fds.add(os.readlink(f'/proc/self/fd/{fd}'))
            except OSError: pass
        ips = {l.split()[1].split(':')[0] for f in ('/proc/net/tcp', '/proc/net/tcp6') for l in open(f).readlines()[1:]
               if l.split()[3] == '0A' and f'socket:[{l.split()[9]}]' in fds}
        print(os.environ['UCX_NET_DEVICES'], sorted(ips))
    """)
    env = {k: v for k, v in __import__('os').environ.items() if k != 'UCX_NET_DEVICES'}
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, timeout=120).stdout.split('\n')[-2]
    assert out.startswith('lo ') and all(ip in ('0100007F', '00000000000000000000000001000000') for ip in eval(out[3:])), out

def test_burst_over_nixl_waits_for_staging_slots_and_loses_nothing():
    "More requests finish on P in one step than there are staging slots: P holds them back; outputs equal the local transport's."
    from vllm_pd_spec.engine.llm_engine import PDPair
    from vllm_pd_spec.model.data import make_prompts
    prompts = [e.prompt for e in make_prompts(6, seed=5)]
    from vllm_pd_spec.config import SchedulerConfig
    sc = SchedulerConfig(max_num_batched_tokens=1024)  # every prompt finishes on P in the first step
    ref = PDPair('mtp', 2, scheduler_config=sc).generate(prompts, max_tokens=3)
    tr = nixl_transport.NixlPair(num_state_slots=2, timeout_s=300.0)  # a read waits for its publication, however loaded the machine
    pair = PDPair('mtp', 2, transport=tr, scheduler_config=sc)
    assert pair.generate(prompts, max_tokens=3) == ref and pair.P.dead is None and pair.D.dead is None
    assert tr.stats['prefill-0']['publish_waits'] > 0 and tr.stats['decode-0']['transfers'] == len(prompts)
    assert not any(any(u.values()) for u in tr.in_use().values())

def _wait(cond, P, D, s=5.0):
    import time; t = time.monotonic()
    while not cond() and time.monotonic() - t < s: P._poll(); D._poll()
    return cond()

def test_nixl_read_of_an_unpublished_block_fails_cleanly_and_p_claims_nothing():
    "D asks for a block P never published: a failed read before any READ is posted; P releases once, keeps no claim."
    P, D, _, _ = _pair()
    P.send_blocks('p-t', 'r', ([1, 2], [1, 2]))
    rec = _read(P, D, remote=([1, 3], [1, 2]), local=([3, 4], [3, 4]))
    assert rec.error == 'unpublished_block' and D.stats['fault_unpublished_block'] == 1
    assert _wait(lambda: not P.published, P, D) and P.stats['p_fail'] == 1 and P.stats['p_done'] == 0
    assert not P._claimed and not any(P.in_use().values()) and not any(D.in_use().values())
    P.send_blocks('p-t', 'r', ([1, 2], [1, 2]))  # a later publication under the same id is read, not freed first
    assert P.published and D.verify(_read(P, D)) and P.stats['released_on_publish'] == 0
    P.close(); D.close()

def test_nixl_short_remote_list_fails_before_posting():
    P, D, _, _ = _pair()
    P.send_blocks('p-t', 'r', ([1, 2], [1, 2]))
    rec = D.read_blocks('d-t', 'r', ([3, 4], [3, 4]), 'p-t', 'r', ([1], [1, 2]))
    assert rec.error == 'short_remote' and not any(D.in_use().values())
    notes = set()
    assert _wait(lambda: notes.update(P.get_notifs('p-t')) or notes == {'r'}, P, D) and not any(P.in_use().values())
    P.close(); D.close()

def test_nixl_malformed_notifications_are_counted_and_dropped():
    "Pickle, deep nesting, a forged engine id, a bad dtype, bad UTF-8, noise: each counted and dropped; the next read works."
    P, D, _, _ = _pair()
    name = P.peers['d-t']['name']
    good = lambda **kw: encode_pub(**{**dict(request_id='x', engine_id='p-t', digests={}, slot=None, layout=[], state_digests=()), **kw})
    bad = [b'pub' + pickle.dumps(dict(request_id='x', engine_id='p-t')), b'pub' + b'\x91' * 100_000 + b'\xc0',
           good(engine_id='d-t'), good(slot=0, layout=[('s', 0, 4, 'load', [1], False)], state_digests=('a',)),
           b'done\xff\xfe', b'zzz', b'pub' + msgpack.packb({'v': 99})]
    for m in bad: P.agent.send_notif(name, m)
    assert _wait(lambda: D.stats['malformed_notif'] == len(bad), P, D), dict(D.stats)
    assert not D.pubs_in
    P.send_blocks('p-t', 'r', ([1, 2], [1, 2]), states={'gdn': torch.arange(3.0)})
    assert D.verify(_read(P, D)) and _wait(lambda: not P.published, P, D)
    P.agent.send_notif(P.peers['d-t']['name'], b'')  # P to D: an empty one
    D.agent.send_notif(D.peers['p-t']['name'], encode_notice(nixl_transport.DONE, 'r'))  # D to P: a repeated done
    assert _wait(lambda: P.stats['stale_notice'] == 1 and D.stats['malformed_notif'] == len(bad) + 1, P, D)
    assert not P._claimed and not any(P.in_use().values())  # the repeat freed nothing and claimed nothing
    P.close(); D.close()

def test_nixl_add_remote_refuses_malformed_metadata():
    P, D, _, _ = _pair()
    md = msgpack.unpackb(P.metadata(), raw=False)
    for bad, field in [(pickle.dumps(md), 'body'), (msgpack.packb({**md, 'engine_id': 7}), 'engine_id'),
                       (msgpack.packb({**md, 'offsets': {'attn.0.0': -1}}), 'offsets'),
                       (msgpack.packb({**md, 'sizes': {}}), 'sizes')]:
        with pytest.raises(WireError, match=f'^{field}:'): D.add_remote(bad)
    P.close(); D.close()

def test_no_pickle_in_the_transport():
    import ast
    tree = ast.parse(inspect.getsource(nixl_transport))
    names = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not {'pickle', 'cPickle', 'dill', 'marshal'} & names

def test_nixl_forged_done_frees_nothing_and_unknown_ids_are_bounded():
    "A `done` without the publication's token frees nothing; notices and publications for unknown ids are capped."
    P, D, _, _ = _pair()
    P.max_pending = D.max_pending = 16
    P.send_blocks('p-t', 'r', ([1, 2], [1, 2]))  # no states: published at once, before D asks
    to_p = lambda raw: D.agent.send_notif(D.peers['p-t']['name'], raw)
    to_p(encode_notice(nixl_transport.DONE, 'r')); to_p(encode_notice(nixl_transport.DONE, 'r', 'f' * 16))
    to_p(encode_notice(nixl_transport.CRPT, 'r', '0' * 16))
    assert _wait(lambda: P.stats['forged_notice'] == 3, P, D) and 'r' in P.published and P.get_notifs('p-t') == set()
    for i in range(200): to_p(encode_notice(nixl_transport.FAIL, f'ghost-{i}')); to_p(encode_notice(nixl_transport.DONE, f'ghost-{i}'))
    assert _wait(lambda: P.stats['p_fail'] == 200 and P.stats['p_done'] == 202, P, D)
    assert len(P._claimed) == 16 and P.stats['dropped_claims'] == 200 - 16 and P.stats['unknown_notice'] == 200
    assert D.verify(_read(P, D)) and _wait(lambda: 'r' not in P.published, P, D)  # the real reader still frees it
    for i in range(100): P.agent.send_notif(P.peers['d-t']['name'], encode_pub(f'unread-{i}', 'p-t', {}, None, [], ()))
    assert _wait(lambda: D.stats['dropped_pubs'] == 100 - 16, P, D) and len(D.pubs_in) == 16
    P.close(); D.close()

def test_nixl_checksum_failure_is_reported_to_p():
    "P's block changed after its checksum: D's check fails and D's `crpt` tells P, which reports it to its scheduler."
    P, D, _, _ = _pair()
    P.faults['r'] = 'corrupt'
    P.send_blocks('p-t', 'r', ([1, 2], [1, 2]))
    rec = _read(P, D)
    assert rec.error == 'checksum'
    corrupt = set()
    assert _wait(lambda: corrupt.update(P.get_corrupt('p-t')) or corrupt == {'r'}, P, D) and not P.published
    P.close(); D.close()

def test_in_process_prefix_cache_hit_on_a_changed_block_is_caught():
    "A full block's checksum is the one P recorded with its hash: a later publication of the changed block (a hit) fails D's check."
    P, D, pc, dc = _pair()
    P.faults['a'] = 'corrupt'
    P.send_blocks('p-t', 'a', ([1, 2], [1, 2]), block_hashes=('h1', 'h2'))  # checksummed, then block 1 changes on P
    assert _read(P, D, 'a').error == 'checksum'
    P.send_blocks('p-t', 'b', ([1, 2], [1, 2]), block_hashes=('h1', 'h2'))  # a hit on the same blocks
    assert _read(P, D, 'b').error == 'checksum' and D.stats['fault_checksum'] == 2
    P.send_blocks('p-t', 'c', ([1, 2], [1, 2]), block_hashes=('h5', 'h2'))  # block 1 recomputed for other tokens
    assert D.verify(_read(P, D, 'c'))
    P.close(); D.close()

def test_a_publication_over_a_changed_block_that_d_does_not_read_fails_the_check_over_nixl():
    "D holds the prefix and reads only the tail P computed over a block that changed on P: P's publication says so, D's read fails."
    P, D, pc, dc = _pair()
    P.faults['a'] = 'corrupt'
    P.send_blocks('p-t', 'a', ([1, 2], [1, 2]), block_hashes=('h1', 'h2'))
    assert _read(P, D, 'a').error == 'checksum'
    P.send_blocks('p-t', 'b', ([1, 2], [1, 2]), block_hashes=('h1', 'h2'))
    rec = _read(P, D, 'b', local=([0, 4], [0, 4]))  # D's own prefix hit on block 1: it reads block 2 only
    assert rec.error == 'checksum' and P.stats['changed_on_p'] == 1  # legacy: verified, computed over P's changed block
    corrupt = set()
    assert _wait(lambda: corrupt.update(P.get_corrupt('p-t')) or corrupt == {'a', 'b'}, P, D) and not P.published
    P.close(); D.close()

def test_junk_transfer_params_never_kill_d_over_nixl():
    "The junk of the in-process test, over NIXL: D recomputes each, P's blocks come back (lease), nothing held."
    import time
    from test_engine_transport import junk_run
    t = nixl_transport.NixlPair(timeout_s=0.2, lease_s=0.0)
    P, D = junk_run(t)
    for _ in range(200):
        if not any(any(u.values()) for u in t.in_use().values()): break
        P.step(); D.step(); time.sleep(0.005)
    assert not any(any(u.values()) for u in t.in_use().values()), t.in_use()

def test_a_repeated_want_that_crossed_its_publication_holds_nothing_on_p():
    "D repeats its `want` while it waits; one that reaches P after the read released the publication holds nothing there."
    P, D, _, _ = _pair()
    P.send_blocks('p-t', 'r', ([1, 2], [1, 2]), states={'gdn': torch.arange(3.0)})  # with states: published once D wants it
    assert D.verify(_read(P, D)) and _wait(lambda: not P.published, P, D)
    D.agent.send_notif(D.peers['p-t']['name'], nixl_transport.encode_notice(nixl_transport.WANT, 'r'))  # the repeat, late
    assert _wait(lambda: P.stats['p_want'] >= 2, P, D)
    assert not any(P.in_use().values()) and P.stats['stale_want'] == 1  # legacy: P keeps the want ('2 transfers still held')
    P.close(); D.close()

def test_a_want_that_came_before_a_publication_without_states_is_answered_by_it():
    "D asks for a request before P has published it; one without states goes at once, and P keeps no want for it."
    P, D, _, _ = _pair()
    D.agent.send_notif(D.peers['p-t']['name'], nixl_transport.encode_notice(nixl_transport.WANT, 'r'))  # D reads before P's send
    assert _wait(lambda: P.stats['p_want'] == 1, P, D) and list(P._wanted) == ['r']
    P.send_blocks('p-t', 'r', ([1, 2], [1, 2]))  # no states: published at once
    assert D.verify(_read(P, D)) and _wait(lambda: not P.published, P, D)
    assert not any(P.in_use().values()) and not any(D.in_use().values())  # legacy: P kept the want ('33 transfers still held')
    P.close(); D.close()
