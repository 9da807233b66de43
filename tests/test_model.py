"""The hybrid model: paged == dense, chunked prefill + decode == full recompute (float64), spec-decode rollback by
state entry, a misclassified multi-token prompt tail corrupts the next step's GDN state, cache transfer helpers."""
import pytest, torch
from vllm_pd_spec.model.gdn import GDN_TOL, gdn_backend, rel_err
from vllm_pd_spec.model.model import HybridLM, ModelCache, make_meta, slots_for, write_kv

@pytest.fixture(scope='module')
def model():
    torch.manual_seed(1)
    return HybridLM().double().eval()

def _cache(m, **kw): return ModelCache(m.attn_layers(), m.gdn_layers(), m.args, num_blocks=24, block_size=4, dtype=torch.float64, **kw)

def _ref(m, s):
    with torch.no_grad(): return m.forward_dense(s[None])[0]

@torch.no_grad()
def test_paged_prefill_equals_dense_mixed_batch(model):
    seqs = [torch.randint(0, 30, (n,), generator=torch.Generator().manual_seed(n)) for n in (13, 1, 7)]
    tables = [[9, 2, 20, 4], [5], [11, 0]]
    cache = _cache(model)
    pos, meta = make_meta([dict(block_table=t, num_computed=0, query_len=len(s)) for t, s in zip(tables, seqs)], 4)
    h = model(torch.cat(seqs), pos, meta, cache)
    q = meta.query_start_loc.tolist()
    for r, s in enumerate(seqs): assert torch.allclose(h[q[r]:q[r + 1]], _ref(model, s), atol=1e-12)

@torch.no_grad()
@pytest.mark.parametrize('chunks', [[12], [5, 7], [1, 1, 10], [4, 4, 4]])
def test_chunks_then_decode_equal_recompute(model, chunks):
    s = torch.randint(0, 30, (15,), generator=torch.Generator().manual_seed(7))
    ref, cache, t, hs = _ref(model, s), _cache(model), 0, []
    for c in chunks:
        pos, meta = make_meta([dict(block_table=[3, 8, 1, 6], num_computed=t, query_len=c)], 4)
        hs.append(model(s[t:t + c], pos, meta, cache)); t += c
    while t < 15:
        pos, meta = make_meta([dict(block_table=[3, 8, 1, 6], num_computed=t, query_len=1, is_prefill=False)], 4)
        hs.append(model(s[t:t + 1], pos, meta, cache)); t += 1
    assert torch.allclose(torch.cat(hs), ref, atol=1e-12)

@torch.no_grad()
@pytest.mark.parametrize('accepted', [0, 1, 2])
def test_spec_decode_rollback(model, accepted):
    s = torch.randint(0, 30, (14,), generator=torch.Generator().manual_seed(11))
    ref, cache, bt = _ref(model, s), _cache(model, num_spec=2), [4, 5, 6, 7]
    pos, meta = make_meta([dict(block_table=bt, num_computed=0, query_len=6)], 4)
    model(s[:6], pos, meta, cache)
    q = s[6:9].clone()
    if accepted < 2: q[accepted + 1] = (q[accepted + 1] + 3) % 30  # first rejected draft
    pos, meta = make_meta([dict(block_table=bt, num_computed=6, query_len=3, is_prefill=False)], 4)
    h = model(q, pos, meta, cache)
    assert torch.allclose(h[:accepted + 1], ref[6:7 + accepted], atol=1e-12)
    n = 7 + accepted
    pos, meta = make_meta([dict(block_table=bt, num_computed=n, query_len=3, is_prefill=False, num_accepted=accepted + 1)], 4)
    assert torch.allclose(model(s[n:n + 3], pos, meta, cache), ref[n:n + 3], atol=1e-12)

@torch.no_grad()
@pytest.mark.parametrize('tail', [1, 2, 3])
def test_tail_classification(model, tail):
    "A prompt tail run as a prefill row is exact; as a decode row the next step is exact only for a 1-token tail."
    s = torch.randint(0, 30, (12,), generator=torch.Generator().manual_seed(5))
    ref, N = _ref(model, s), 10
    out = {}
    for is_prefill in (True, False):
        p, d = _cache(model, num_spec=3), _cache(model, num_spec=3)
        pos, meta = make_meta([dict(block_table=[0, 1, 2], num_computed=0, query_len=N - tail)], 4)
        model(s[:N - tail], pos, meta, p)
        d.write_blocks([7, 8, 9], p.read_blocks([0, 1, 2])); d.write_state(2, p.read_state(0))
        pos, meta = make_meta([dict(block_table=[7, 8, 9], num_computed=N - tail, query_len=tail, state_slot=2, is_prefill=is_prefill)], 4)
        h1 = model(s[N - tail:N], pos, meta, d)
        pos, meta = make_meta([dict(block_table=[7, 8, 9], num_computed=N, query_len=1, state_slot=2, is_prefill=False)], 4)
        out[is_prefill] = (h1, model(s[N:N + 1], pos, meta, d))
    assert torch.allclose(out[True][0], ref[N - tail:N], atol=1e-12) and torch.allclose(out[True][1], ref[N:N + 1], atol=1e-12)
    assert torch.allclose(out[False][0], ref[N - tail:N], atol=1e-12)
    assert torch.allclose(out[False][1], ref[N:N + 1], atol=1e-12) == (tail == 1)

def test_slots_and_bad_slot():
    assert slots_for([3, 1], range(6), 4) == [12, 13, 14, 15, 4, 5]
    kc, vc = torch.zeros(2, 4, 1, 1), torch.zeros(2, 4, 1, 1)
    write_kv((kc, vc), torch.ones(2, 1, 1), torch.ones(2, 1, 1), torch.tensor([-1, 5]))
    assert kc.flatten().tolist() == [0, 0, 0, 0, 0, 1, 0, 0]
    with pytest.raises(IndexError): write_kv((kc, vc), torch.ones(1, 1, 1), torch.ones(1, 1, 1), torch.tensor([8]))

@torch.no_grad()
def test_decode_row_longer_than_state_pool(model):
    cache = _cache(model, num_spec=1)
    pos, meta = make_meta([dict(block_table=[0, 1], num_computed=0, query_len=3, is_prefill=False)], 4)
    with pytest.raises(ValueError, match='GDN state entries'): model(torch.tensor([1, 2, 3]), pos, meta, cache)

@pytest.mark.gpu
@torch.no_grad()
def test_cuda_forward_matches_float64(model):
    mc = HybridLM().cuda().eval(); mc.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    s = torch.randint(0, 30, (9,), generator=torch.Generator().manual_seed(3))
    c = ModelCache(mc.attn_layers(), mc.gdn_layers(), mc.args, num_blocks=32, block_size=4, device='cuda')
    pos, meta = make_meta([dict(block_table=[5, 1, 9], num_computed=0, query_len=9)], 4, device='cuda')
    out, ref = mc(s.cuda(), pos, meta, c), _ref(model, s)
    path = gdn_backend(out)  # fla when installed, else our Triton kernel: each has its stated float32 tolerance
    assert rel_err(out, ref) <= GDN_TOL[(path, torch.float32)], (path, rel_err(out, ref))
