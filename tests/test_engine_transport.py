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
    from vllm_pd_spec.engine.scheduler import Scheduler, toy_runner_output
    model = ModelConfig((LayerSpec('full_attention'), LayerSpec('gdn')), block_size=4)
    t = _CorruptingTransport()
    S = {r: Scheduler(VllmConfig(model=model, role=r, cache_config=CacheConfig(num_gpu_blocks=32))) for r in ('prefill', 'decode')}
    groups = {n: i for i, g in enumerate(S['decode'].kv_cache_config.kv_cache_groups) for n in g.layer_names}
    W = {r: PDConnectorWorker(f'{r}-0', t) for r in S}
    for r, w in W.items(): w.register_kv_caches({n: np.zeros((32, 4, 2)) for n in groups}, groups)
    def step(r):
        s, w = S[r], W[r]
        so = s.schedule(); w.start_load_kv(so.kv_connector_metadata)
        return s.update_from_output(so, toy_runner_output(s, so, kv_connector_output=w.get_finished()))
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
