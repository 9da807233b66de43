"""The fused input-assembly kernel (`assemble_inputs`): through the interpreter on a CPU (compiled on a GPU) it equals
the three-stage reference in every output buffer, on random steps of every row kind, dtypes and guard; with the guard
on no prompt position loses its token, with it off the fuzzer finds one; bad arguments raise a ValueError naming them."""
import random
import pytest, torch
from hypothesis import given, settings, find, strategies as st
from vllm_pd_spec.kernels.combine import triton, launch_mode
from vllm_pd_spec.kernels.assemble import assemble_inputs, step_example, check_assemble_values
from vllm_pd_spec.kernels.batches import random_step, run_step, same_outputs, prompt_lost, row_spec, build_step

needs_triton = pytest.mark.skipif(triton is None, reason='needs triton (the interpreter runs on CPU)')

@st.composite
def steps(draw, device='cpu', dtypes='random'):
    "A random step (see `random_step`), its randomness drawn by Hypothesis so that failures shrink."
    return random_step(draw(st.randoms(use_true_random=False)), device=device, dtypes=dtypes)

@given(steps(), st.booleans())
def test_reference_keeps_prompt_and_writes_every_slot(s, guard):
    "The reference: positions and seq_lens are exact; every scheduled slot is written; the guard keeps every prompt token."
    o = run_step(s, 'reference', guard)
    r, qsl = s['idx_mapping'].shape[0], s['query_start_loc'].tolist()
    nc = [s['num_computed_tokens'][j].item() for j in s['idx_mapping'].tolist()]
    assert o['seq_lens'].tolist() == [c + qsl[b + 1] - qsl[b] for b, c in enumerate(nc)] + [0] * (s['seq_lens'].shape[0] - r)
    assert o['positions'][:qsl[-1]].tolist() == s['seq_pos'] and (o['positions'][qsl[-1]:] == -3).all()
    assert (o['input_ids'][:qsl[-1]] != -2).all() and (o['input_ids'][qsl[-1]:] == -2).all()
    if guard: assert prompt_lost(s, o) == []

@needs_triton
@given(steps(), st.booleans())
def test_interpreter_equals_reference(s, guard):
    assert same_outputs(run_step(s, 'interpreter', guard, check_values=True), run_step(s, 'reference', guard)) == []

@needs_triton
@given(steps(), st.sampled_from([None, 1, 16, 17, 200]))
def test_block_size_is_only_a_performance_choice(s, max_query_len):
    "Any `max_query_len` (too small, None, large) gives the same outputs: a longer row loops."
    kw = dict(s, max_query_len=max_query_len)
    assert same_outputs(run_step(kw, 'interpreter'), run_step(s, 'reference')) == []

def test_fuzzer_finds_the_legacy_prompt_loss():
    "With the guard off some step loses a prompt token; the shrunk step's lost slot is x_N of a prompt-tail row."
    s = find(steps(), lambda s: bool(prompt_lost(s, run_step(s, 'reference', False))), settings=settings(max_examples=1000, database=None))
    i = prompt_lost(s, run_step(s, 'reference', False))[0]
    assert s['seq_pos'][i] == s['row_prefill'][i] - 1 and prompt_lost(s, run_step(s, 'reference', True)) == []

@pytest.mark.parametrize('backend', ['reference'] + (['interpreter'] if triton is not None else []))
def test_example(backend):
    kw = step_example()
    li = assemble_inputs(**kw, backend=backend)
    assert kw['input_ids'].tolist() == [10, 11, 12, 27, 40, 41, 34, -1, -1, -1, -1, -1]
    assert kw['positions'].tolist()[:9] == [0, 1, 2, 7, 8, 9, 4, 5, 6] and kw['seq_lens'].tolist() == [3, 10, 7, 0, 0]
    assert kw['next_prefill_tokens'].tolist() == [[13, -1, -1, 0]] and li.tolist() == [2, 3, 4, 5, 6, 7, 8]

def _i32(xs): return torch.tensor(xs, dtype=torch.int32)

@pytest.mark.parametrize('backend', ['reference'] + (['interpreter'] if triton is not None else []))
@pytest.mark.parametrize('name,change', [
    ('input_ids', dict(input_ids=torch.zeros(12))),
    ('positions', dict(positions=torch.zeros(2, 6, dtype=torch.int64))),
    ('seq_lens', dict(seq_lens=_i32([0, 0]))),
    ('next_prefill_tokens', dict(next_prefill_tokens=torch.zeros(0, 4, dtype=torch.int32))),
    ('all_token_ids', dict(all_token_ids=torch.zeros(4, 12, 2, dtype=torch.int32))),
    ('num_computed_tokens', dict(num_computed_tokens=torch.zeros(4, dtype=torch.float32))),
    ('num_computed_tokens', dict(num_computed_tokens=_i32([0, 0, 7, -1]))),
    ('last_sampled_tokens', dict(last_sampled_tokens=torch.zeros(4, 2, dtype=torch.int64))),
    ('idx_mapping', dict(idx_mapping=_i32([0, 2, 2]))),
    ('idx_mapping', dict(idx_mapping=_i32([0, 2, 4]))),
    ('query_start_loc', dict(query_start_loc=_i32([0, 3, 2, 9]))),
    ('query_start_loc', dict(query_start_loc=_i32([0, 3, 6, 13]))),
    ('cu_num_logits', dict(cu_num_logits=_i32([0, 1, 5, 8]), num_logits=8)),
    ('cu_num_logits', dict(cu_num_logits=_i32([1, 1, 4, 7]))),
    ('num_logits', dict(num_logits=8)),
    ('num_logits', dict(num_logits=-1)),
    ('all_token_ids', dict(all_token_ids=torch.zeros(4, 5, dtype=torch.int32))),
    ('max_query_len', dict(max_query_len=2.5)),
    ('guard', dict(guard='no')),
    ('num_new_sampled_tokens', dict(num_new_sampled_tokens=2)),
])
def test_bad_arguments_raise_value_error_naming_them(backend, name, change):
    kw = step_example() | change
    with pytest.raises(ValueError, match=name): assemble_inputs(**kw, backend=backend)

def test_torch_backend_is_refused():
    with pytest.raises(ValueError, match='backend'): assemble_inputs(**step_example(), backend='torch')

# --- on a GPU: the compiled kernel, through the hot path (the second call of a key launches directly)
@pytest.mark.gpu
@settings(max_examples=200)
@given(steps(device='cuda', dtypes='vllm'), st.booleans())
def test_cuda_kernel_equals_reference(s, guard):
    ref = run_step(s, 'reference', guard)
    for _ in range(2):  # first call compiles through Triton, the second takes the direct launch
        assert same_outputs(run_step(s, None, guard), ref) == []
    assert set(launch_mode().values()) == {'direct'}

@pytest.mark.gpu
def test_cuda_large_steps():
    from vllm_pd_spec.kernels.bench import bench_step
    for k in (1, 3, 7):
        s = bench_step(4096, k, device='cuda', seed=k)
        for guard in (True, False):
            assert same_outputs(run_step(s, None, guard), run_step(s, 'reference', guard)) == []
    prefill = build_step([row_spec('prefill', 5000, 0, 3000), row_spec('decode', 40, 45, 3)], k=3, device='cuda')
    for mq in (None, 16, 3000):  # a 3,000-token prefill chunk: loops of 16 and of 1,024, and one block per row
        assert same_outputs(run_step(dict(prefill, max_query_len=mq), None), run_step(prefill, 'reference')) == []

@pytest.mark.skipif(triton is None, reason='needs triton')
@pytest.mark.parametrize('guard', [True, False])
def test_hot_path_passes_the_kernel_its_arguments(monkeypatch, guard):
    "The hot path (a cached key) skips every check and launches with the arguments in the kernel's order."
    from vllm_pd_spec.kernels import assemble as a, combine as c
    kw = step_example()
    names = ('input_ids', 'positions', 'seq_lens', 'next_prefill_tokens', 'idx_mapping', 'query_start_loc', 'all_token_ids',
             'prefill_len', 'num_computed_tokens', 'last_sampled_tokens', 'draft_tokens', 'cu_num_logits')
    ints = (kw['seq_lens'].shape[0], kw['next_prefill_tokens'].stride(0), kw['next_prefill_tokens'].shape[0],
            kw['all_token_ids'].stride(0), kw['last_sampled_tokens'].stride(0), kw['draft_tokens'].stride(0))
    block = a._query_block(kw['max_query_len'])
    calls = []
    def launch(grid, *args):
        calls.append(grid); c._jit(a._assemble_kernel, True)[(grid,)](*args, block, 16, 4, 256, 1, guard)
    launch.direct = True
    ref = step_example(); ref_li = assemble_inputs(**ref, guard=guard, backend='reference')
    monkeypatch.setitem(c._LAUNCHES, a._assemble_key(*(kw[n] for n in names), 1, guard, None, block, ints), launch)
    monkeypatch.setattr(a, '_validate_assemble', lambda *x, **k: pytest.fail('the hot path ran the checks'))
    li = assemble_inputs(**kw, guard=guard)
    assert calls == [4] and li.tolist() == ref_li.tolist()
    assert all(kw[n].tolist() == ref[n].tolist() for n in ('input_ids', 'positions', 'seq_lens', 'next_prefill_tokens'))

@pytest.mark.gpu
def test_cuda_second_call_skips_the_checks(monkeypatch):
    from vllm_pd_spec.kernels import assemble as a
    ref = step_example(); ref_li = assemble_inputs(**ref, backend='reference')
    kw = step_example('cuda'); assemble_inputs(**kw)
    monkeypatch.setattr(a, '_validate_assemble', lambda *x, **k: pytest.fail('the second call ran the checks'))
    kw = step_example('cuda'); li = assemble_inputs(**kw)
    assert li.tolist() == ref_li.tolist() and kw['input_ids'].tolist() == ref['input_ids'].tolist()
