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
