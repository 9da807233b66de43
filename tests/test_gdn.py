"""The gated delta rule: the float32 loop agrees with float64, the chunked form equals the loop, the Triton kernel
(interpreter on CPU, CUDA on GPU) and fla's chunked kernel (CUDA) equal the float64 recurrence for varlen batches from
pooled states within the tolerance stated per dtype (`GDN_TOL`)."""
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

# The differential test: each CUDA kernel against the float64 recurrence on a varlen batch (cu_seqlens) whose initial
# states are gathered from a state pool by index, at float32 and bfloat16, within `GDN_TOL` (stated on the GDN page).
# The reference runs on the inputs the kernel saw (rounded to its dtype, widened to float64). fla has no CPU path: its
# autotuner asks for a GPU driver even under TRITON_INTERPRET=1, so its cases run on CUDA only.
CU = [0, 7, 64, 65, 300]  # four sequences of 7, 57, 1 and 235 tokens in one flat batch
IDX = [5, 0, 3, 2]        # the pool entry each sequence starts from

def _varlen_case(H=4, K=32):
    xs = random_gdn_inputs(B=1, T=CU[-1], H=H, K=K, V=K, dtype=torch.float64, seed=5)
    pool = torch.randn(6, H, K, K, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.5
    return xs, pool

def _kernel(path, xs, pool, dtype, device):
    "`(o [T, H, V], final states [N, H, K, V])` of one kernel over the varlen batch."
    from vllm_pd_spec.model.gdn import gdn_triton, fla_chunk_gated_delta_rule
    cu, idx = torch.tensor(CU, device=device), torch.tensor(IDX, device=device)
    x = [t.to(device=device, dtype=dtype) for t in xs[:5]]
    if path == 'triton': return gdn_triton(*(t[0] for t in x), cu_seqlens=cu, state_pool=pool.to(device).float(), state_idx=idx)
    o, h = fla_chunk_gated_delta_rule(*x, initial_state=pool.to(device).float()[idx], output_final_state=True, cu_seqlens=cu)
    return o[0], h

def differential_errors(path, dtype, device='cuda'):
    "Largest relative error of outputs and final states, per sequence, against the float64 recurrence."
    from vllm_pd_spec.model.gdn import rel_err
    xs, pool = _varlen_case()
    o, h = _kernel(path, xs, pool, dtype, device)
    seen = [t.to(dtype).double() for t in xs[:5]]  # what the kernel read
    errs = []
    for n in range(len(IDX)):
        a, b = CU[n], CU[n + 1]
        ro, rh = gdn_recurrent(*[t[:, a:b] for t in seen], initial_state=pool.float().double()[IDX[n]][None])
        errs.append(max(rel_err(o[a:b], ro[0]), rel_err(h[n], rh[0])))
    return errs

@pytest.mark.gpu
@pytest.mark.parametrize('path', ['triton', 'fla'])
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16], ids=['float32', 'bfloat16'])
def test_kernel_matches_float64_recurrence(path, dtype):
    from vllm_pd_spec.model.gdn import GDN_TOL, fla_chunk_gated_delta_rule
    if path == 'fla' and fla_chunk_gated_delta_rule is None: pytest.skip('needs fla-core (the fla extra)')
    errs = differential_errors(path, dtype)
    print(f'{path} vs float64 recurrence, {str(dtype).split(".")[-1]}: largest relative error {max(errs):.2e} '
          f'(bound {GDN_TOL[path, dtype]:.0e})')
    assert max(errs) < GDN_TOL[path, dtype], errs

@pytest.mark.skipif(triton is None, reason='needs triton')
def test_triton_differential_interpreter_cpu():
    "The float32 differential case of our Triton kernel, on CPU under the Triton interpreter."
    code = ('import torch, tests.test_gdn as t; from vllm_pd_spec.model.gdn import GDN_TOL; '
            'e = t.differential_errors("triton", torch.float32, "cpu"); assert max(e) < GDN_TOL["triton", torch.float32], e')
    r = subprocess.run([sys.executable, '-c', code], env={**os.environ, 'TRITON_INTERPRET': '1'},
                       capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert r.returncode == 0, r.stderr[-2000:]

def test_tolerances_stated_per_dtype():
    "Every kernel has a bound per dtype it runs; the reference path's float64 bound is rounding."
    from vllm_pd_spec.model.gdn import GDN_TOL
    assert {(p, d) for p in ('triton', 'fla') for d in (torch.float32, torch.bfloat16)} <= set(GDN_TOL)
    assert GDN_TOL['torch', torch.float64] <= 1e-10 and all(0 < v < 0.1 for v in GDN_TOL.values())
    x = random_gdn_inputs(T=40, dtype=torch.float64, seed=4)
    o, h = gdn_recurrent(*x[:5], initial_state=x[5])
    oc, hc = gdn_chunked(*[t.float() for t in x[:5]], initial_state=x[5].float())
    from vllm_pd_spec.model.gdn import rel_err
    assert max(rel_err(oc, o), rel_err(hc, h)) < GDN_TOL['torch', torch.float32]

@pytest.mark.gpu
def test_gdn_chunk_fla_path():
    "`gdn_chunk` on CUDA float32 takes fla when installed, and agrees with our chunked form; float64 never takes fla."
    from vllm_pd_spec.model.gdn import gdn_chunk, gdn_backend, fla_chunk_gated_delta_rule
    if fla_chunk_gated_delta_rule is None: pytest.skip('needs fla-core (the fla extra)')
    x = random_gdn_inputs(B=2, T=100, H=3, K=32, V=32, dtype=torch.float32, device='cuda', seed=9)
    assert gdn_backend(x[0]) == 'fla' and gdn_backend(x[0].double()) == 'triton'
    o, h = gdn_chunk(*x[:5], initial_state=x[5])
    ro, rh = gdn_chunk(*x[:5], initial_state=x[5], backend='torch')
    from vllm_pd_spec.model.gdn import GDN_TOL, rel_err
    assert max(rel_err(o, ro), rel_err(h, rh)) < GDN_TOL['fla', torch.float32]
