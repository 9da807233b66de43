"""The gated delta rule: the float32 loop agrees with float64, the chunked form equals the loop, the Triton kernel
(interpreter on CPU, CUDA on GPU) equals the reference for varlen batches from pooled states."""
import os, subprocess, sys
import pytest, torch
from vllm_pd_spec.model.gdn import gdn_recurrent, gdn_chunked, random_gdn_inputs, triton

def test_float32_matches_float64():
    x = random_gdn_inputs(dtype=torch.float64, seed=3)
    o64, h64 = gdn_recurrent(*x[:5], initial_state=x[5])
    o32, h32 = gdn_recurrent(*[t.float() for t in x[:5]], initial_state=x[5].float())
    assert torch.allclose(o32.double(), o64, atol=1e-5) and torch.allclose(h32.double(), h64, atol=1e-5)

@pytest.mark.parametrize('T,cs', [(1, 16), (16, 16), (37, 16), (37, 5), (50, 64)])
def test_chunked_equals_recurrent(T, cs):
    x = random_gdn_inputs(T=T, dtype=torch.float64, seed=T)
    o, h = gdn_recurrent(*x[:5], initial_state=x[5])
    oc, hc = gdn_chunked(*x[:5], initial_state=x[5], chunk_size=cs)
    assert torch.allclose(oc, o, atol=1e-10) and torch.allclose(hc, h, atol=1e-10)

def test_split_carries_state():
    x = random_gdn_inputs(T=20, dtype=torch.float64)
    o, h, hs = gdn_recurrent(*x[:5], initial_state=x[5], return_all_states=True)
    o2, h2 = gdn_recurrent(*[t[:, 7:] for t in x[:5]], initial_state=hs[:, 6])
    assert torch.allclose(o2, o[:, 7:], atol=1e-12) and torch.allclose(h2, h, atol=1e-12)

def _check_triton(device):
    from vllm_pd_spec.model.gdn import gdn_triton
    xs = random_gdn_inputs(B=1, T=23, H=3, K=16, V=8, dtype=torch.float32, device=device, seed=7)
    cu = torch.tensor([0, 5, 6, 23], device=device)
    pool = torch.randn(7, 3, 16, 8, generator=torch.Generator().manual_seed(0)).to(device) * 0.5
    idx = torch.tensor([4, 0, 6], device=device)
    o, h = gdn_triton(*[x[0] for x in xs[:5]], cu_seqlens=cu, state_pool=pool, state_idx=idx)
    _, hs = gdn_triton(*[x[0] for x in xs[:5]], cu_seqlens=cu, state_pool=pool, state_idx=idx, return_all_states=True)
    for n in range(3):
        a, b = cu[n].item(), cu[n + 1].item()
        ro, rh, rhs = gdn_recurrent(*[x[:, a:b].double().cpu() for x in xs[:5]],
                                    initial_state=pool[idx[n]][None].double().cpu(), return_all_states=True)
        assert torch.allclose(o[a:b].double().cpu(), ro[0], atol=1e-4)
        assert torch.allclose(h[n].double().cpu(), rh[0], atol=1e-4)
        assert torch.allclose(hs[a:b].double().cpu(), rhs[0], atol=1e-4)

@pytest.mark.skipif(triton is None, reason='needs triton')
def test_triton_interpreter_cpu():
    code = 'import tests.test_gdn as t; t._check_triton("cpu")'
    r = subprocess.run([sys.executable, '-c', code], env={**os.environ, 'TRITON_INTERPRET': '1'},
                       capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert r.returncode == 0, r.stderr[-2000:]

@pytest.mark.gpu
def test_triton_cuda():
    _check_triton('cuda')

def test_backend_switch():
    from vllm_pd_spec.model.gdn import gdn_backend, set_gdn_backend, gdn_chunk, GDN_BACKENDS
    assert gdn_backend(torch.zeros(1)) == 'torch'  # CPU: the reference path
    with pytest.raises(ValueError, match='name'): set_gdn_backend('cuda')
    old = set_gdn_backend('fla')
    try:
        with pytest.raises(RuntimeError, match='fla'): gdn_backend(torch.zeros(1))  # CPU tensors never take fla
    finally: set_gdn_backend(old)
    x = random_gdn_inputs(T=33, dtype=torch.float64, seed=2)
    o, h = gdn_chunk(*x[:5], initial_state=x[5])
    ro, rh = gdn_recurrent(*x[:5], initial_state=x[5])
    assert torch.allclose(o, ro, atol=1e-10) and torch.allclose(h, rh, atol=1e-10)

# fla's chunked kernel against the float64 recurrence: varlen batch (cu_seqlens), initial states gathered from a pool.
# Tolerances (largest error / largest reference magnitude): float32 inputs 5e-3, bfloat16 inputs 5e-2.
FLA_TOL = {torch.float32: 5e-3, torch.bfloat16: 5e-2}

@pytest.mark.gpu
@pytest.mark.parametrize('dtype', list(FLA_TOL))
def test_fla_matches_reference(dtype):
    from vllm_pd_spec.model.gdn import fla_chunk_gated_delta_rule
    if fla_chunk_gated_delta_rule is None: pytest.skip('needs fla-core (the fla extra)')
    H, K = 4, 32
    xs = random_gdn_inputs(B=1, T=300, H=H, K=K, V=K, dtype=torch.float64, seed=5)
    cu = [0, 7, 64, 65, 300]
    pool = torch.randn(6, H, K, K, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.5
    idx = [5, 0, 3, 2]
    o, h = fla_chunk_gated_delta_rule(*(x.cuda().to(dtype) for x in xs[:5]), initial_state=pool[idx].cuda().float(),
                                      output_final_state=True, cu_seqlens=torch.tensor(cu, device='cuda'))
    errs = []
    for n in range(4):
        a, b = cu[n], cu[n + 1]
        ro, rh = gdn_recurrent(*[x[:, a:b] for x in xs[:5]], initial_state=pool[idx[n]][None])
        errs += [((o[0, a:b].double().cpu() - ro[0]).abs().max() / ro.abs().max()).item(),
                 ((h[n].double().cpu() - rh[0]).abs().max() / rh.abs().max()).item()]
    print(f'fla vs float64 recurrence, {dtype}: largest relative error {max(errs):.2e}')
    assert max(errs) < FLA_TOL[dtype], errs

@pytest.mark.gpu
def test_gdn_chunk_fla_path():
    "`gdn_chunk` on CUDA float32 takes fla when installed, and agrees with our chunked form; float64 never takes fla."
    from vllm_pd_spec.model.gdn import gdn_chunk, gdn_backend, fla_chunk_gated_delta_rule
    if fla_chunk_gated_delta_rule is None: pytest.skip('needs fla-core (the fla extra)')
    x = random_gdn_inputs(B=2, T=100, H=3, K=32, V=32, dtype=torch.float32, device='cuda', seed=9)
    assert gdn_backend(x[0]) == 'fla' and gdn_backend(x[0].double()) == 'triton'
    o, h = gdn_chunk(*x[:5], initial_state=x[5])
    ro, rh = gdn_chunk(*x[:5], initial_state=x[5], backend='torch')
    assert ((o - ro).abs().max() / ro.abs().max()).item() < FLA_TOL[torch.float32]
    assert ((h - rh).abs().max() / rh.abs().max()).item() < FLA_TOL[torch.float32]
