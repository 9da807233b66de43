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
