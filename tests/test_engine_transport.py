"The worker side of the P/D connector: LocalTransport over numpy and torch caches, checksums, async reads."
import numpy as np
import pytest
from vllm_pd_spec.engine.connector import PDConnectorMetadata, ReqMeta
from vllm_pd_spec.engine.transport import LocalTransport, PDConnectorWorker, TransferRecord, digest

def caches(lib, num_blocks=8, seed=0):
    rng = np.random.default_rng(seed)
    kv = {'layers.0': (rng.normal(size=(num_blocks, 4, 2)), rng.normal(size=(num_blocks, 4, 2))),
          'mtp.0': rng.normal(size=(num_blocks, 4, 3)), 'layers.1.gdn': rng.normal(size=(num_blocks, 2, 2))}
    if lib == 'torch':
        torch = pytest.importorskip('torch')
        kv = {n: tuple(torch.as_tensor(x) for x in t) if isinstance(t, tuple) else torch.as_tensor(t) for n, t in kv.items()}
    return kv, {'layers.0': 0, 'mtp.0': 0, 'layers.1.gdn': 1}

@pytest.mark.parametrize('lib', ['numpy', 'torch'])
def test_read_blocks_maps_ids_and_verifies(lib):
    t = LocalTransport()
    (pk, groups), (dk, _) = caches(lib, seed=1), caches(lib, seed=2)
    t.register_kv_caches('P', pk, groups); t.register_kv_caches('D', dk, groups)
    assert t.read_blocks('D', 'r', ([5, 6], [0, 7]), 'P', 'r', ([1, 2], [0, 3])) is None  # not published yet
    t.send_blocks('P', 'r', ([1, 2], [0, 3]))
    rec = t.read_blocks('D', 'r', ([5, 6], [0, 7]), 'P', 'r', ([1, 2], [0, 3]))
    assert t.verify(rec) and rec.num_blocks == 2 * 3 + 1  # (K, V, mtp) x 2 blocks + one GDN block (null pair skipped)
    assert digest(dk['layers.0'][1][6]) == digest(pk['layers.0'][1][2]) and digest(dk['layers.1.gdn'][7]) == digest(pk['layers.1.gdn'][3])
    assert t.get_notifs('P') == {'r'} and t.get_notifs('P') == set()

def test_verify_catches_a_corrupted_block():
    rec = TransferRecord('r', 'P', 1, {('l', 1): 'a'}, {('l', 1): 'b'})
    assert not LocalTransport().verify(rec)

def test_worker_pending_read_completes_after_publish_and_states_arrive():
    t = LocalTransport()
    (pk, groups), (dk, _) = caches('numpy', seed=1), caches('numpy', seed=2)
    P, D = PDConnectorWorker('P', t), PDConnectorWorker('D', t)
    P.register_kv_caches(pk, groups, read_states=lambda rid: {'gdn': np.full(3, 4.0)})
    D.register_kv_caches(dk, groups)
    D.start_load_kv(PDConnectorMetadata(reqs_to_recv={'r': ReqMeta('r', ([4], [0]), ([1], [0]), 'P', 'r', 4)}))
    assert D.get_finished().finished_recving == set()
    P.start_load_kv(PDConnectorMetadata(reqs_to_send={'r': ([1], [0])}))
    assert D.get_finished().finished_recving == {'r'} and P.get_finished().finished_sending == {'r'}
    assert (D.take_states('r')['gdn'] == 4.0).all() and D.take_states('r') is None
    assert (dk['mtp.0'][4] == pk['mtp.0'][1]).all()

class _CorruptingTransport(LocalTransport):
    "Reads land with one block's digest changed (as if a byte flipped on the way), or with `error` set."
    def __init__(self, error=None): super().__init__(); self.error = error
    def read_blocks(self, engine_id, request_id, *a):
        rec = super().read_blocks(engine_id, request_id, *a)
        if rec is not None:
            if self.error: rec.error = self.error
            else: k = next(iter(rec.dst_digests)); rec.dst_digests[k] = 'flipped'
        return rec

@pytest.mark.parametrize('error', [None, 'timeout', 'transfer_error'])
def test_worker_reports_a_failed_read_instead_of_asserting(error):
    t = _CorruptingTransport(error)
    (pk, groups), (dk, _) = caches('numpy', seed=1), caches('numpy', seed=2)
    P, D = PDConnectorWorker('P', t), PDConnectorWorker('D', t)
    P.register_kv_caches(pk, groups, read_states=lambda rid: {'gdn': np.full(3, 4.0)})
    D.register_kv_caches(dk, groups)
    P.start_load_kv(PDConnectorMetadata(reqs_to_send={'r': ([1], [0])}))
    D.start_load_kv(PDConnectorMetadata(reqs_to_recv={'r': ReqMeta('r', ([4], [0]), ([1], [0]), 'P', 'r', 4)}))
    out = D.get_finished()
    assert out.failed_recving == {'r'} and out.finished_recving == set() and D.failures == [('r', error or 'checksum')]
    assert D.take_states('r') is None and D.records == [] and D.get_finished().failed_recving == set()  # reported once
    assert P.get_finished().finished_sending == {'r'}  # P still frees its blocks

def test_transfer_record_error_fails_nothing_by_itself():
    rec = TransferRecord('r', 'P', 1, {('l', 1): 'a'}, {('l', 1): 'a'})
    assert rec.error is None and LocalTransport().verify(rec)

def test_scheduler_recomputes_a_corrupted_load_and_counts_it():
    "P/D over a transport whose read fails verification: D recomputes the prompt; nothing leaks on either side."
    from vllm_pd_spec.config import LayerSpec, ModelConfig, VllmConfig, CacheConfig, make_kv_transfer_params
    from vllm_pd_spec.engine.request import Request
    from vllm_pd_spec.engine.scheduler import Scheduler
    from vllm_pd_spec.engine.toy_runner import toy_runner_output
    model = ModelConfig((LayerSpec('full_attention'), LayerSpec('gdn')), block_size=4)
    t = _CorruptingTransport()
    S = {r: Scheduler(VllmConfig(model=model, role=r, cache_config=CacheConfig(num_gpu_blocks=32))) for r in ('prefill', 'decode')}
    groups = {n: i for i, g in enumerate(S['decode'].kv_cache_config.kv_cache_groups) for n in g.layer_names}
    W = {r: PDConnectorWorker(f'{r}-0', t) for r in S}
    for r, w in W.items(): w.register_kv_caches({n: np.zeros((32, 4, 2)) for n in groups}, groups)
    def step(r):
        s, w = S[r], W[r]
        scheduler_output = s.schedule(); w.start_load_kv(scheduler_output.kv_connector_metadata)
        return s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output, kv_connector_output=w.get_finished()))
    prompt = list(range(1, 12))
    S['prefill'].add_request(Request('r', prompt, max_tokens=1, kv_transfer_params=make_kv_transfer_params(do_remote_decode=True)))
    (out,) = step('prefill')
    S['decode'].add_request(Request('r', prompt, max_tokens=3, kv_transfer_params=dict(out.kv_transfer_params)))
    toks = []
    for _ in range(20):
        if not (S['decode'].has_requests() or S['prefill'].has_requests()): break
        toks += [t for o in step('decode') for t in o.new_token_ids]; step('prefill')
    assert W['decode'].failures == [('r', 'checksum')] and S['decode'].num_recomputed_loads == 1
    assert S['prefill'].num_recomputed_loads == 0 and len(toks) == 3
    assert all(s.kv_cache_manager.get_num_free_blocks() == 31 for s in S.values())


# --- Faults a peer (or a broken worker) can cause: each is survived, nothing is freed twice or held forever.
from vllm_pd_spec.config import LayerSpec, ModelConfig, VllmConfig, CacheConfig, make_kv_transfer_params
from vllm_pd_spec.engine.request import Request, RequestStatus
from vllm_pd_spec.engine.scheduler import Scheduler
from vllm_pd_spec.engine.toy_runner import toy_runner_output
from vllm_pd_spec.engine.outputs import KVConnectorOutput

NUM_BLOCKS = 32

class Clock:
    "A clock the test moves by hand, for leases and deadlines."
    def __init__(self): self.t = 0.0
    def __call__(self): return self.t

class Pair:
    "A P and a D scheduler over one transport, each with a worker on numpy caches; the toy runner samples."
    def __init__(self, transport=None):
        model = ModelConfig((LayerSpec('full_attention'), LayerSpec('gdn')), block_size=4)
        self.t = transport or LocalTransport(clock=Clock())
        self.S = {r: Scheduler(VllmConfig(model=model, role=r, cache_config=CacheConfig(num_gpu_blocks=NUM_BLOCKS)))
                  for r in ('prefill', 'decode')}
        groups = {n: i for i, g in enumerate(self.S['decode'].kv_cache_config.kv_cache_groups) for n in g.layer_names}
        self.W = {r: PDConnectorWorker(f'{r}-0', self.t) for r in self.S}
        for w in self.W.values(): w.register_kv_caches({n: np.zeros((NUM_BLOCKS, 4, 2)) for n in groups}, groups)
        self.prompt, self.toks = list(range(1, 12)), []

    def step(self, r, extra=None):
        "One step of `r`; `extra` (a `KVConnectorOutput`) is merged into what the worker reports."
        s, w = self.S[r], self.W[r]
        scheduler_output = s.schedule(); w.start_load_kv(scheduler_output.kv_connector_metadata)
        k = w.get_finished()
        if extra is not None:
            k = KVConnectorOutput(k.finished_sending | extra.finished_sending, k.finished_recving | extra.finished_recving,
                                  k.failed_recving | extra.failed_recving)
        outs = s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output, kv_connector_output=k))
        if r == 'decode': self.toks += [t for o in outs for t in o.new_token_ids]
        return outs

    def prefill(self, rid='r'):
        "P prefills `rid`; returns the `kv_transfer_params` D gets."
        self.S['prefill'].add_request(Request(rid, self.prompt, max_tokens=1,
                                              kv_transfer_params=make_kv_transfer_params(do_remote_decode=True)))
        (out,) = self.step('prefill')
        return dict(out.kv_transfer_params)

    def run(self, steps=30):
        for _ in range(steps):
            if not (self.S['decode'].has_requests() or self.S['prefill'].has_requests()): return
            self.step('decode'); self.step('prefill')
        raise AssertionError('the pair did not drain')

    def assert_clean(self):
        "Both pools full, no request left, nothing held by the transport or waiting in the scheduler's sets."
        for s in self.S.values():
            assert s.kv_cache_manager.get_num_free_blocks() == NUM_BLOCKS - 1 and not s.requests
            assert not s.finished_recving_kv_req_ids and not s.running and not s.waiting
        assert not any(self.t.in_use().values()), self.t.in_use()

def test_short_remote_list_fails_the_load_and_d_recomputes():
    "P's params cover fewer tokens (and blocks) than D maps: the load fails before a byte moves; D recomputes; P frees."
    pair = Pair()
    params = pair.prefill()
    params['remote_num_tokens'] -= 4; params['remote_block_ids'] = tuple(g[:-1] for g in params['remote_block_ids'])
    pair.S['decode'].add_request(Request('r', pair.prompt, max_tokens=3, kv_transfer_params=params))
    pair.run()
    assert pair.W['decode'].failures == [('r', 'short_remote')] and pair.W['decode'].records == []
    assert pair.S['decode'].num_recomputed_loads == 1 and len(pair.toks) == 3 and pair.t.stats['fault_short_remote'] == 1
    pair.assert_clean()

@pytest.mark.parametrize('cut', ['tokens', 'blocks', 'groups'])
def test_short_remote_is_refused_without_truncating(cut):
    "Worker and transport each refuse a plan whose remote side is shorter: no zip silently drops the tail."
    t = LocalTransport()
    (pk, groups), (dk, _) = caches('numpy', seed=1), caches('numpy', seed=2)
    P, D = PDConnectorWorker('P', t), PDConnectorWorker('D', t)
    P.register_kv_caches(pk, groups); D.register_kv_caches(dk, groups)
    P.start_load_kv(PDConnectorMetadata(reqs_to_send={'r': ([1, 2], [3])}))
    local, remote, n = ([4, 5], [6]), ([1, 2], [3]), 8
    if cut == 'blocks': remote = ([1], [3])
    if cut == 'groups': remote = ([1, 2],)
    D.start_load_kv(PDConnectorMetadata(reqs_to_recv={'r': ReqMeta('r', local, remote, 'P', 'r', n, 4 if cut == 'tokens' else n)}))
    assert D.get_finished().failed_recving == {'r'} and D.failures == [('r', 'short_remote')]
    assert (dk['mtp.0'][5] != pk['mtp.0'][2]).all()  # nothing was copied
    assert P.get_finished().finished_sending == {'r'} and not any(t.in_use().values())
    if cut != 'tokens':  # the transport refuses it too, called directly
        t.send_blocks('P', 'q', ([1, 2], [3]))
        assert t.read_blocks('D', 'q', local, 'P', 'q', remote).error == 'short_remote'

def test_read_of_an_unpublished_block_fails_cleanly():
    "D asks for a block P never published: a failed read, not an AssertionError out of start_load_kv; P is released once."
    t = LocalTransport()
    (pk, groups), (dk, _) = caches('numpy', seed=1), caches('numpy', seed=2)
    P, D = PDConnectorWorker('P', t), PDConnectorWorker('D', t)
    P.register_kv_caches(pk, groups); D.register_kv_caches(dk, groups)
    P.start_load_kv(PDConnectorMetadata(reqs_to_send={'r': ([1, 2], [3])}))
    D.start_load_kv(PDConnectorMetadata(reqs_to_recv={'r': ReqMeta('r', ([4, 5], [6]), ([1, 7], [3]), 'P', 'r', 8)}))
    out = D.get_finished()
    assert out.failed_recving == {'r'} and D.failures == [('r', 'unpublished_block')] and D.records == []
    assert P.get_finished().finished_sending == {'r'} and P.get_finished().finished_sending == set()  # once
    assert not any(t.in_use().values())
    # a later publication under the same id is read normally: no stale claim frees it first
    P.start_load_kv(PDConnectorMetadata(reqs_to_send={'r': ([1, 2], [3])}))
    D.start_load_kv(PDConnectorMetadata(reqs_to_recv={'r': ReqMeta('r', ([4, 5], [6]), ([1, 2], [3]), 'P', 'r', 8)}))
    assert D.get_finished().finished_recving == {'r'} and P.get_finished().finished_sending == {'r'}

def test_d_abort_before_scheduling_releases_p_blocks_by_lease():
    "D aborts the request before it ever schedules it: no read comes; P's lease releases the blocks (not before)."
    pair = Pair()
    params = pair.prefill()
    pair.S['decode'].add_request(Request('r', pair.prompt, max_tokens=3, kv_transfer_params=params))
    pair.S['decode'].finish_requests('r')
    for _ in range(3): pair.step('prefill')
    assert pair.S['prefill'].requests and pair.t.in_use()['published'] == 1  # held: the lease has not run out
    pair.t.clock.t += pair.t.lease_s + 1
    pair.step('prefill')
    assert pair.t.stats['lease_expired'] == 1
    pair.assert_clean()

def test_read_deadline_and_claim_expire():
    "A publication that never comes fails D's read at its deadline; the claim it leaves on P expires with the lease."
    clock = Clock(); t = LocalTransport(timeout_s=5, lease_s=10, clock=clock)
    (pk, groups), (dk, _) = caches('numpy', seed=1), caches('numpy', seed=2)
    t.register_kv_caches('P', pk, groups); t.register_kv_caches('D', dk, groups)
    assert t.read_blocks('D', 'r', ([4], [5]), 'P', 'r', ([1], [2])) is None
    clock.t = 6
    assert t.read_blocks('D', 'r', ([4], [5]), 'P', 'r', ([1], [2])).error == 'timeout' and t.in_use()['claims'] == 1
    clock.t = 20; t.get_notifs('P')
    assert not any(t.in_use().values())

def test_spurious_finished_sending_for_a_running_request_is_ignored():
    "A notice that P's blocks were sent, for a request still running (or one already freed): counted, nothing freed."
    s = Scheduler(VllmConfig(role='prefill', cache_config=CacheConfig(num_gpu_blocks=NUM_BLOCKS)))
    s.add_request(Request('run', list(range(20)), max_tokens=4))  # a local request, still running after one step
    scheduler_output = s.schedule(); s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output))
    held = s.kv_cache_manager.get_num_free_blocks()
    for _ in range(4):
        scheduler_output = s.schedule()  # upstream asserts here; the legacy form freed the request and raised KeyError on the next step
        s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output, kv_connector_output=KVConnectorOutput(finished_sending={'run', 'nobody'})))
        if not s.requests: break
        assert s.kv_cache_manager.get_num_free_blocks() <= held
    assert s.num_ignored_kv_notices >= 2 and not s.requests and s.kv_cache_manager.get_num_free_blocks() == NUM_BLOCKS - 1

def test_duplicate_finished_sending_frees_once():
    pair = Pair()
    pair.prefill()
    for _ in range(3): pair.step('prefill', KVConnectorOutput(finished_sending={'r'}))  # the real one, then repeats
    assert pair.S['prefill'].num_ignored_kv_notices == 2 and pair.t.in_use()['published'] == 1
    pair.t.clock.t += pair.t.lease_s + 1; pair.step('prefill')  # the lease releases the publication; P frees nothing again
    assert pair.S['prefill'].num_ignored_kv_notices == 3
    pair.assert_clean()

def test_duplicate_finished_recving_does_not_linger():
    "The load's notice comes again after the request runs: it is ignored, not kept in `finished_recving_kv_req_ids`."
    pair = Pair()
    pair.S['decode'].add_request(Request('r', pair.prompt, max_tokens=3, kv_transfer_params=pair.prefill()))
    pair.step('decode'); pair.step('prefill'); pair.step('decode'); pair.step('decode')  # D loads, then runs
    assert pair.S['decode'].requests['r'].status == RequestStatus.RUNNING
    pair.step('decode', KVConnectorOutput(finished_recving={'r'}, failed_recving={'r'}))  # repeated, and a late failure
    assert not pair.S['decode'].finished_recving_kv_req_ids and pair.S['decode'].num_ignored_kv_notices == 2
    pair.run()
    assert len(pair.toks) == 3 and pair.S['decode'].num_recomputed_loads == 0
    pair.assert_clean()

def test_notices_for_the_wrong_role_are_ignored():
    s = Scheduler(VllmConfig(role='decode', cache_config=CacheConfig(num_gpu_blocks=NUM_BLOCKS)))
    s.add_request(Request('x', list(range(8)), max_tokens=2))
    s.finish_requests('x')
    scheduler_output = s.schedule()
    s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output, kv_connector_output=KVConnectorOutput(finished_sending={'x'})))
    assert s.num_ignored_kv_notices == 1 and s.kv_cache_manager.get_num_free_blocks() == NUM_BLOCKS - 1


# --- The NIXL wire format (msgpack with explicit fields), checked without an agent
from hypothesis import given, strategies as st
from vllm_pd_spec.engine.nixl_transport import WireError, decode_notice, decode_pub, decode_metadata, encode_pub, encode_metadata

def test_wire_round_trip():
    raw = encode_pub('r', 'p0', {('a.0', 3): 'ff'}, 1, [('s', 8, 16, 'bfloat16', (2, 4), True)], ('ee',))
    d = decode_pub(raw, slot_bytes=64)
    assert d['digests'] == {('a.0', 3): 'ff'} and d['slot'] == 1 and d['layout'] == [('s', 8, 16, 'bfloat16', (2, 4), True)]
    md = decode_metadata(encode_metadata('p0', b'agent', b'descs', {'a.0': 0}, {'a.0': 64}))
    assert md['engine_id'] == 'p0' and md['agent'] == b'agent'

@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_wire_error(raw):
    "Whatever a peer sends, decoding ends in a checked dict or a `WireError` (a ValueError), never another exception."
    for tag in (b'pub', b'done', b''):
        for decode in (lambda r: decode_pub(r, 1 << 20), decode_notice, decode_metadata):
            try: decode(tag + raw)
            except WireError: pass

@given(st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.text(max_size=5) | st.binary(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3), max_leaves=20))
def test_any_msgpack_value_decodes_or_raises_wire_error(value):
    import msgpack
    for raw in (b'pub' + msgpack.packb(value), b'pub' + msgpack.packb({'v': 1, 'x': value}), msgpack.packb(value)):
        for decode in (lambda r: decode_pub(r, 1 << 20), decode_metadata):
            try: decode(raw)
            except WireError: pass

def test_a_prefix_cache_hit_on_a_block_changed_after_it_was_computed_fails_the_check():
    "P's checksum of a full block is the one recorded with its hash: a later publication of the changed block (a hit) fails D's check."
    t = LocalTransport(faults={'a': 'corrupt'})
    (pk, groups), (dk, _) = caches('numpy', seed=1), caches('numpy', seed=2)
    t.register_kv_caches('P', pk, groups); t.register_kv_caches('D', dk, groups)
    read = lambda rid: t.read_blocks('D', rid, ([5, 6], [7]), 'P', rid, ([1, 2], [3]))
    t.send_blocks('P', 'a', ([1, 2], [3]), block_hashes=('h1', 'h2'))  # computed, checksummed, then block 1 changes on P
    assert not t.verify(read('a'))
    t.send_blocks('P', 'b', ([1, 2], [3]), block_hashes=('h1', 'h2'))  # a hit on the same blocks before P heard of 'a'
    rec = read('b')
    assert not t.verify(rec) and rec.error == 'checksum'  # P's own check too: block 1 no longer matches its record
    t.send_blocks('P', 'c', ([1, 2], [3]), block_hashes=('h5', 'h2'))  # block 1 recomputed for other tokens: a new checksum
    assert t.verify(read('c'))
    t.send_blocks('P', 'd', ([1, 2], [3]))  # no hashes (partial blocks, no prefix caching): checksummed at publication
    assert t.verify(read('d')) and len(t.block_digests) == 2 * 3 + 1  # one record per (cache, block id) with a hash

def test_a_publication_over_a_changed_block_that_d_does_not_read_fails_the_check():
    "D holds the prefix itself and reads only the tail P computed over a block that changed on P: P's own check fails D's read."
    t = LocalTransport(faults={'a': 'corrupt'})
    (pk, groups), (dk, _) = caches('numpy', seed=1), caches('numpy', seed=2)
    t.register_kv_caches('P', pk, groups); t.register_kv_caches('D', dk, groups)
    t.send_blocks('P', 'a', ([1, 2], [3]), block_hashes=('h1', 'h2'))  # block 1 changes on P after its checksum
    assert t.read_blocks('D', 'a', ([5, 6], [7]), 'P', 'a', ([1, 2], [3])).error is None  # not verified yet: D's worker checks
    assert t.get_corrupt('P') == set()
    t.send_blocks('P', 'b', ([1, 2], [3]), block_hashes=('h1', 'h2'))  # a hit on block 1: block 2 was computed over it
    rec = t.read_blocks('D', 'b', ([0, 6], [7]), 'P', 'b', ([1, 2], [3]))  # D's own prefix hit: it reads blocks 2 and 3 only
    assert rec.error == 'checksum' and not t.verify(rec) and t.stats['changed_on_p'] == 1  # legacy: verified, on P's changed block
    assert t.get_corrupt('P') == {'b'} and 'b' in t.get_notifs('P')  # P uncaches at once and frees its blocks

JUNK = [[1], {'a': 1}, {1, 2}, 12345, 1.5, float('nan'), None, b'prefill-0', True, '', 'many', -1, 10**30, [[None]], [['x']],
        [[True]], [[-3]], 'x' * 5000, ((1, 2),), [[1.0]]]
FIELDS = ('remote_engine_id', 'remote_request_id', 'remote_block_ids', 'remote_num_tokens')

def junk_run(transport):
    "Every junk value in every field of P's params: D never dies, recomputes, and gives the standalone output; nothing held."
    from vllm_pd_spec.config import make_kv_transfer_params
    from vllm_pd_spec.engine.toy_kv_runner import build_toy_engine, run_standalone
    P, D = build_toy_engine('prefill', transport, 64), build_toy_engine('decode', transport, 64)
    cases = [(f, v) for f in FIELDS for v in JUNK]
    prompts = {f'j{i}': [i % 90 + 1, 9, 2, 7, 3, 8, 1, 4, 6] for i in range(len(cases))}  # no two share a block
    want = run_standalone(prompts, 3, prefix_caching=False)
    for (rid, prompt), (field, value) in zip(prompts.items(), cases):
        P.add_request(Request(rid, prompt, max_tokens=1, kv_transfer_params=make_kv_transfer_params(do_remote_decode=True)))
        params = None
        while params is None:
            params = next((o.kv_transfer_params for o in P.step() if o.request_id == rid and o.finish_reason), None)
        D.add_request(Request(rid, prompt, max_tokens=3, kv_transfer_params=dict(params, **{field: value})))
        for _ in range(20_000):
            if not (P.has_work() or D.has_work()): break
            P.step(); D.step()
        assert D.dead is None and P.dead is None and D.outputs.pop(rid) == want[rid], (field, value)
    assert D.scheduler.num_recomputed_loads >= len(cases) - 4  # a few values are harmless (e.g. a longer remote count)
    return P, D

def test_junk_transfer_params_never_kill_d():
    "A list, dict, set, number or junk string where P's engine id, request id, block ids or token count go: a failed load, recomputed."
    t = LocalTransport(timeout_s=0.0, lease_s=0.0)
    junk_run(t)
    assert not any(t.in_use().values())

def test_d_heartbeats_keep_p_lease_while_the_request_waits_in_d_queue():
    "D runs one request at a time; the next waits in D's queue past P's lease: D's heartbeats renew it, so its load lands (no recompute)."
    from vllm_pd_spec.config import make_kv_transfer_params, VllmConfig, CacheConfig, SchedulerConfig
    from vllm_pd_spec.engine.toy_kv_runner import build_toy_engine, TOY_MODEL, TOY_DRAFTER, ToyKVRunner
    from vllm_pd_spec.engine.llm_engine import LLMEngine
    from vllm_pd_spec.engine.kv_cache_manager import get_kv_cache_config
    now = [0.0]
    t = LocalTransport(timeout_s=1000.0, lease_s=5.0, clock=lambda: now[0])
    P = build_toy_engine('prefill', t, 64)
    vc = VllmConfig(model=TOY_MODEL, role='decode', cache_config=CacheConfig(num_gpu_blocks=64), scheduler_config=SchedulerConfig(max_num_seqs=1))
    D = LLMEngine(vc, transport=t, runner=ToyKVRunner, kv_cache_config=get_kv_cache_config(vc, drafter_layer_names=TOY_DRAFTER))
    prompts = {'a': [5, 9, 2, 7, 3, 8, 1, 4, 6], 'b': [6, 1, 8, 2, 9, 4, 7, 3, 5]}
    p_side = lambda rid: P.add_request(Request(rid, prompts[rid], max_tokens=1, kv_transfer_params=make_kv_transfer_params(do_remote_decode=True)))
    p_side('a')
    for _ in range(300):
        for o in P.step():
            if o.finish_reason: D.add_request(Request(o.request_id, prompts[o.request_id], max_tokens=30, kv_transfer_params=o.kv_transfer_params))
        D.step(); now[0] += 1.0  # a second a step: 'b' waits ~30 s behind 'a' in D's queue
        if D.scheduler.running and 'b' not in P.scheduler.requests and 'b' not in D.outputs: p_side('b')  # once 'a' runs on D
        if not (P.has_work() or D.has_work()) and 'b' in D.finished: break
    assert len(D.outputs['a']) == len(D.outputs['b']) == 30 and D.scheduler.num_recomputed_loads == 0 and t.stats['lease_expired'] == 0
