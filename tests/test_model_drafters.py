"""Shipped weights and drafters: the target solves the task, every drafter's spec decoding is lossless (outputs equal
plain greedy decoding) with high acceptance in a clean standalone loop; float64 and the weights file load."""
import pytest, torch
from vllm_pd_spec.model.drafters import load_model, spec_decode, WEIGHTS
from vllm_pd_spec.model.data import make_prompts, exact_match

@pytest.fixture(scope='module')
def model(): return load_model()

@pytest.fixture(scope='module')
def prompts(): return make_prompts(6, seed=77)

def test_weights_are_small_safetensors():
    assert WEIGHTS.suffix == '.safetensors' and WEIGHTS.stat().st_size < 4e6

def test_target_solves_task(model, prompts):
    assert all(exact_match(e.answer, spec_decode(model, e.prompt, 8)[0]) for e in prompts)

@pytest.mark.parametrize('method,k', [('mtp', 2), ('mtp', 4), ('eagle', 3), ('dflash', 3), ('dflash', 7)])
def test_spec_decode_lossless_and_accepting(model, prompts, method, k):
    for e in prompts[:3]:
        ref, _ = spec_decode(model, e.prompt, 10)
        out, st = spec_decode(model, e.prompt, 10, method, k=k)
        assert out == ref
        assert st.num_drafts > 0 and st.mean_acceptance_length > 1.5

def test_float64(model, prompts):
    m64 = load_model(dtype=torch.float64)
    assert next(m64.parameters()).dtype == torch.float64
    assert spec_decode(m64, prompts[0].prompt, 8, 'mtp', k=3)[0] == spec_decode(model, prompts[0].prompt, 8, 'mtp', k=3)[0]

def test_short_conv_paged_equals_dense_whatever_the_split():
    "The conv MTP's convolution (ours): taps of this forward from the input, earlier ones through the block table; zeros before 0."
    from vllm_pd_spec.model.drafters import short_conv, short_conv_dense
    from vllm_pd_spec.model.model import make_meta
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(13, 6, generator=g, dtype=torch.float64), torch.randn(6, 3, generator=g, dtype=torch.float64)
    ref = short_conv_dense(x[None], w)[0]
    assert torch.allclose(ref[0], x[0] + w[:, -1] * x[0])  # position 0: only its own tap
    for cuts in ((0, 13), (0, 1, 2, 13), (0, 5, 6, 7, 13)):
        cache, out = torch.zeros(5, 3, 2, 3, dtype=torch.float64), []
        for a, b in zip(cuts, cuts[1:]):
            pos, meta = make_meta([dict(block_table=[4, 0, 3, 1, 2], num_computed=a, query_len=b - a)], 3)
            out.append(short_conv(x[a:b], w, cache, pos, meta))
        assert torch.allclose(torch.cat(out), ref), cuts
    cache[0] = 7.  # a stale entry at positions 3..5 (block 0) changes the next forward's first taps: the state is read from the cache
    pos, meta = make_meta([dict(block_table=[4, 0, 3, 1, 2], num_computed=6, query_len=1)], 3)
    assert not torch.allclose(short_conv(x[6:7], w, cache, pos, meta), ref[6:7])

def test_conv_mtp_depth_paged_equals_dense():
    from dataclasses import replace
    from vllm_pd_spec.model.drafters import ConvMTPDrafter, ConvDraftLayer
    from vllm_pd_spec.model.model import ModelArgs, HybridLM, ModelCache, make_meta
    a = ModelArgs(vocab_size=30, d_model=16, n_heads=2, head_dim=8, mlp_hidden=24, layer_kinds=('full_attention',), n_mtp=2)
    torch.manual_seed(0)
    d, t = ConvMTPDrafter(a).double(), HybridLM(a).double()
    ids, h = torch.randint(0, 30, (1, 11)), torch.randn(1, 11, 16, dtype=torch.float64)
    dense = d.modules_[1].dense(t.embed(ids), h, torch.arange(11))[0]
    cache, out = ModelCache(d.attn_layers(), [], a, 3, 4, dtype=torch.float64), []
    for lo, hi in ((0, 6), (6, 7), (7, 11)):
        pos, meta = make_meta([dict(block_table=[2, 0, 1], num_computed=lo, query_len=hi - lo)], 4)
        out.append(d(t, 1, ids[0, lo:hi], h[0, lo:hi], pos, meta, cache))
    assert torch.allclose(torch.cat(out), dense)
    assert d.attn_layers()[:2] == ['mtp.0', 'mtp.1'] and 'mtp.1.sconv.out' in cache.kv
    with pytest.raises(ValueError, match='d_model'): ConvDraftLayer(replace(a, head_dim=4), 'x')
    with pytest.raises(ValueError, match='kernel'): ConvDraftLayer(a, 'x', kernel=1)

@pytest.mark.parametrize('form', ['rows', 'gather'])
def test_paged_attention_gap(form):
    "A gap of g: a query reads its own position and those more than g back, in both paged forms; gap 0 is plain causal attention."
    import vllm_pd_spec.model.model as M
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(10, 2, 4, generator=g, dtype=torch.float64) for _ in range(3))
    cache = (torch.zeros(3, 4, 2, 4, dtype=torch.float64), torch.zeros(3, 4, 2, 4, dtype=torch.float64))
    pos, meta = M.make_meta([dict(block_table=[2, 0, 1], num_computed=0, query_len=10)], 4)
    M.write_kv(cache, k, v, meta.slot_mapping)
    p = torch.arange(10)
    for gap in (0, 1, 3):
        mask = (p[None] <= p[:, None]) & ((p[None] == p[:, None]) | (p[None] < p[:, None] - gap))
        assert torch.allclose(M.paged_attention(q, cache, pos, meta, form, gap), M._attend(q, k, v, mask)), gap
    assert torch.allclose(M.paged_attention(q, cache, pos, meta, form), M._attend(q, k, v, p[None] <= p[:, None]))
    meta.causal = False
    with pytest.raises(ValueError, match='causal'): M.paged_attention(q, cache, pos, meta, form, 2)

def test_conv_mtp_gap_depth_reads_recent_positions_through_its_convolutions():
    "A conv MTP depth with gap 3 (the registered variant's): paged equals dense, and the last position is blind to the attention KV of the 3 before it, not to their convolution state."
    from vllm_pd_spec.model.drafters import ConvMTPDrafter, ConvDraftLayer
    from vllm_pd_spec.model.model import ModelArgs, HybridLM, ModelCache, make_meta
    a = ModelArgs(vocab_size=30, d_model=16, n_heads=2, head_dim=8, mlp_hidden=24, layer_kinds=('full_attention',), n_mtp=2)
    torch.manual_seed(0)
    d, t = ConvMTPDrafter(a, gap=3).double(), HybridLM(a).double()
    assert d.gap == 3 and all(m.gap == 3 for m in d.modules_)
    ids, h = torch.randint(0, 30, (1, 11)), torch.randn(1, 11, 16, dtype=torch.float64)
    dense = d.modules_[1].dense(t.embed(ids), h, torch.arange(11))[0]
    def run(zero=()):
        "The depth over positions 0..9, then 10 alone, with `zero`'s layers zeroed at positions 7..9 before the last forward."
        cache = ModelCache(d.attn_layers(), [], a, 3, 4, dtype=torch.float64)
        out = []
        for lo, hi in ((0, 6), (6, 10), (10, 11)):
            if lo == 10:
                for l in zero:
                    for c in cache.kv[l]: c[1, 3] = 0; c[2, :2] = 0  # positions 7 (block 1, offset 3), 8 and 9 (block 2, offsets 0, 1)
            pos, meta = make_meta([dict(block_table=[0, 1, 2], num_computed=lo, query_len=hi - lo)], 4)
            out.append(d(t, 1, ids[0, lo:hi], h[0, lo:hi], pos, meta, cache))
        return torch.cat(out)
    clean = run()
    assert torch.allclose(clean, dense)
    assert torch.allclose(run(('mtp.1',))[-1], clean[-1])  # the gap: positions 7..9 are not attended from 10
    assert not torch.allclose(run(('mtp.1.sconv.kv', 'mtp.1.sconv.out'))[-1], clean[-1])  # their convolution state is read
    with pytest.raises(ValueError, match='gap'): ConvDraftLayer(a, 'x', kernel=4, gap=4)
