"""Ours against vLLM 0.33.0's own kernels, loaded at run time from its `input_batch.py` (`$VLLM_SRC`, else the installed
vllm): the fused kernel equals vLLM's three kernels run in its runner's order, in every output buffer, and our combine
kernel equals vLLM's, on random steps and batches; through the interpreter on a CPU, compiled on a GPU. Skipped only where
no vLLM source is present at all; where vllm is installed, a failure to load its kernels is a failure."""
import importlib.util, os
import pytest, torch
from hypothesis import given, settings, strategies as st
from vllm_pd_spec.kernels.combine import triton, upstream_case, launch_mode
from vllm_pd_spec.kernels.upstream import find_input_batch, load_vllm_input_kernels
from vllm_pd_spec.kernels.batches import (random_step, run_step, run_step_vllm, same_outputs, random_rows, build_batch,
                                        run_case, _KERNEL_ARGS)

def _source():
    try: return find_input_batch()
    except FileNotFoundError:
        if importlib.util.find_spec('vllm') is not None: raise  # vllm installed but its kernels not found: a failure
        return None

SOURCE = _source()
pytestmark = [pytest.mark.skipif(SOURCE is None, reason="no vLLM source: set VLLM_SRC to an unpacked vLLM 0.33.0 (or install vllm)"),
              pytest.mark.skipif(triton is None, reason='needs triton (the interpreter runs on CPU)')]
EXAMPLES = int(os.environ.get('KERNEL_TEST_EXAMPLES', 300))  # the interpreter runs vLLM's 1,024-wide blocks in Python

@pytest.fixture(scope='module')
def vk_cpu(): return load_vllm_input_kernels(SOURCE, interpret=True)

@pytest.fixture(scope='module')
def vk_cuda(): return load_vllm_input_kernels(SOURCE, interpret=False)

@st.composite
def vllm_steps(draw, device='cpu', dtypes='random'):
    "Random steps in the domain vLLM's runner builds (k + num_new_sampled >= 1)."
    return random_step(draw(st.randoms(use_true_random=False)), device=device, dtypes=dtypes, vllm_domain=True)

@st.composite
def vllm_batches(draw, device='cpu'):
    "Random batches for the combine kernel alone (prefill chunks, decode and prompt-tail rows), k + num_new_sampled >= 1."
    rng = draw(st.randoms(use_true_random=False))
    k, ns = rng.randint(0, 4), rng.choice((0, 1))
    if k == 0: ns = 1
    return build_batch(random_rows(rng, rng.randint(1, 6), k, ns), k, ns, seed=rng.randrange(2**31), device=device,
                       int64_ids=rng.random() < 0.5)

def _vllm_combine(vk, b):
    kw = {a: (b[a].clone() if isinstance(b[a], torch.Tensor) else b[a]) for a in _KERNEL_ARGS}
    li = vk.combine_sampled_and_draft_tokens(**kw)
    return kw['input_ids'].cpu(), li.cpu()

def test_loaded_the_release_file(vk_cpu):
    assert vk_cpu.is_0_33_0, f'{vk_cpu.file} is not the input_batch.py of vLLM 0.33.0 (sha256 {vk_cpu.sha256})'

@pytest.mark.parametrize('case', range(4))
def test_vllm_kernel_gives_its_own_test_answers(vk_cpu, case):
    kw, want_ids, want_li = upstream_case(case)
    assert vk_cpu.combine_sampled_and_draft_tokens(**kw).tolist() == want_li and kw['input_ids'].tolist() == want_ids

@settings(max_examples=EXAMPLES)
@given(vllm_steps())
def test_fused_equals_vllm_three(vk_cpu, s):
    assert same_outputs(run_step(s, 'interpreter', check_values=True), run_step_vllm(s, vk_cpu)) == []

@settings(max_examples=EXAMPLES)
@given(vllm_batches())
def test_combine_equals_vllm_combine(vk_cpu, b):
    ours = run_case(b, 'interpreter', True)
    theirs = _vllm_combine(vk_cpu, b)
    assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])

# --- on a GPU: compiled, ours through the default (hot) path
@pytest.mark.gpu
@settings(max_examples=150)
@given(vllm_steps(device='cuda', dtypes='vllm'))
def test_cuda_fused_equals_vllm_three(vk_cuda, s):
    theirs = run_step_vllm(s, vk_cuda)
    for _ in range(2): assert same_outputs(run_step(s, None), theirs) == []
    assert set(launch_mode().values()) == {'direct'}

@pytest.mark.gpu
@settings(max_examples=150)
@given(vllm_batches(device='cuda'))
def test_cuda_combine_equals_vllm_combine(vk_cuda, b):
    theirs = _vllm_combine(vk_cuda, b)
    for _ in range(2):
        ours = run_case(b, None, True)
        assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])
