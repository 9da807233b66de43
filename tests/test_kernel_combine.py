"""Fix 6 kernel: the Triton kernel (interpreter on CPU, CUDA on GPU), the torch-ops version and the reference
agree exactly on random batches; with the guard on no prompt position changes; with it off the fuzzer finds the
overwrite. Plus upstream's four cases and the argument checks."""
import os, subprocess, sys
import pytest, torch
from hypothesis import given, settings, find, event, strategies as st
from vllm_pd_spec.contracts.guard import writes_last_sampled, legacy_writes_last_sampled
from vllm_pd_spec.kernels.combine import (combine_sampled_and_draft_tokens, combine_sampled_and_draft_tokens_ref,
                                          combine_backend, upstream_case, triton, launch_mode)
from vllm_pd_spec.kernels.batches import row_spec, build_batch, run_case, prompt_overwrites, sweep

needs_triton = pytest.mark.skipif(triton is None, reason='needs triton (the interpreter runs on CPU)')

@st.composite
def batches(draw, max_rows=6, max_k=4, device='cpu'):
    "A step: prefill chunks, decode rows with 0..k drafts and D-side prompt-tail rows, slots permuted."
    k, ns = draw(st.integers(0, max_k)), draw(st.sampled_from([0, 1]))
    kinds = ['prefill'] + (['decode'] if k + ns > 0 else []) + (['tail'] if k > 0 else [])
    rows = []
    for _ in range(draw(st.integers(1, max_rows))):
        kind, p = draw(st.sampled_from(kinds)), draw(st.integers(1, 12))
        if kind == 'prefill': rows.append(row_spec(kind, p, draw(st.integers(0, p - 1)), draw(st.integers(1, p)), ns))
        elif kind == 'decode': rows.append(row_spec(kind, p, p + draw(st.integers(0, 5)), draw(st.integers(1 - ns, k)), ns))
        else: rows.append(row_spec(kind, p, draw(st.integers(0, p - 1)), draw(st.integers(1, k)), ns))
    return build_batch(rows, k, ns, seed=draw(st.integers(0, 2**31 - 1)), device=device,
                       extra_slots=draw(st.integers(0, 4)), placeholder_tail=draw(st.booleans()),
                       int64_ids=draw(st.booleans()))

def contract_expectation(b, guard):
    "input_ids after the step and logits_indices, computed row by row from the contract (no kernel code)."
    ids, li = b['input_ids'].tolist(), []
    slots, qsl, cu = b['idx_mapping'].tolist(), b['query_start_loc'].tolist(), b['cu_num_logits'].tolist()
    ns, last, pl = b['num_new_sampled_tokens'], b['last_sampled_tokens'].tolist(), b['prefill_len'].tolist()
    may = writes_last_sampled if guard else legacy_writes_last_sampled
    for r, (s, seq_len) in enumerate(zip(slots, b['seq_lens'].tolist())):
        nl, end = cu[r + 1] - cu[r], qsl[r + 1]
        li += range(end - nl, end)
        if seq_len <= pl[s]: continue
        if may(seq_len, nl, pl[s], ns): ids[end - nl] = last[s]
        nd = nl - ns
        for i in range(nd): ids[end - nd + i] = b['draft_tokens'][s, i].item()
    return ids, li

@given(batches(), st.booleans())
def test_reference_follows_contract(b, guard):
    ids, li = run_case(b, 'reference', guard)
    assert (ids.tolist(), li.tolist()) == contract_expectation(b, guard)
    if guard: assert prompt_overwrites(b, ids) == []  # the invariant: no position below prefill_len changes

@given(batches(), st.booleans())
def test_torch_ops_equal_reference(b, guard):
    assert all(torch.equal(x, y) for x, y in zip(run_case(b, 'torch', guard), run_case(b, 'reference', guard)))

@needs_triton
@given(batches(), st.booleans())
def test_triton_interpreter_equals_reference(b, guard):
    ids, li = run_case(b, 'interpreter', guard)
    ref_ids, ref_li = run_case(b, 'reference', guard)
    assert torch.equal(ids, ref_ids) and torch.equal(li, ref_li)
    if guard: assert prompt_overwrites(b, ids) == []

@needs_triton
def test_fuzzer_finds_the_legacy_overwrite():
    "With the guard off, Hypothesis finds a batch whose prompt token is overwritten; it is a D-side prompt-tail row."
    b = find(batches(), lambda b: bool(prompt_overwrites(b, run_case(b, 'interpreter', False)[0])),
             settings=settings(max_examples=1000, database=None))
    i = prompt_overwrites(b, run_case(b, 'interpreter', False)[0])[0]
    assert b['seq_pos'][i] == b['row_prefill'][i] - 1  # x_N, the last prompt token
    assert prompt_overwrites(b, run_case(b, 'interpreter', True)[0]) == []

def test_fuzzer_finds_the_legacy_overwrite_reference():
    b = find(batches(), lambda b: bool(prompt_overwrites(b, run_case(b, 'reference', False)[0])),
             settings=settings(max_examples=1000, database=None))
    assert len(b['seq_lens']) == 1  # shrunk to one prompt-tail row

BACKENDS_CPU = ['reference', 'torch'] + (['interpreter'] if triton is not None else [])

@pytest.mark.parametrize('backend', BACKENDS_CPU)
@pytest.mark.parametrize('case', range(4))
def test_upstream_cases(backend, case):
    kw, want_ids, want_li = upstream_case(case)
    li = combine_sampled_and_draft_tokens(**kw, backend=backend)
    assert kw['input_ids'].tolist() == want_ids and li.tolist() == want_li

@pytest.mark.parametrize('backend', BACKENDS_CPU)
def test_persistent_out_buffer(backend):
    kw, _, want_li = upstream_case(2)
    out = torch.full((10,), -7, dtype=torch.int64)
    li = combine_sampled_and_draft_tokens(**kw, out=out, backend=backend)
    assert li.data_ptr() == out.data_ptr() and out.tolist() == want_li + [-7] * 6

def _bad(**change):
    kw, _, _ = upstream_case(3)
    kw.update(change)
    return kw

@pytest.mark.parametrize('backend', BACKENDS_CPU)
@pytest.mark.parametrize('name,kw', [
    ('out', dict(out=torch.zeros(1, dtype=torch.int64))),
    ('out', dict(out=torch.zeros(4, dtype=torch.int32))),
    ('num_new_sampled_tokens', dict(num_new_sampled_tokens=2)),
    ('num_new_sampled_tokens', dict(num_new_sampled_tokens=-1)),
    ('input_ids', dict(input_ids=torch.zeros(4))),
    ('input_ids', dict(input_ids=torch.zeros(2, 2, dtype=torch.int32))),
    ('idx_mapping', dict(idx_mapping=torch.zeros(2, dtype=torch.float32))),
    ('last_sampled_tokens', dict(last_sampled_tokens=torch.zeros(2, 3, dtype=torch.int64))),
    ('query_start_loc', dict(query_start_loc=torch.zeros(2, dtype=torch.int32))),
    ('seq_lens', dict(seq_lens=torch.zeros(1, dtype=torch.int32))),
    ('prefill_len', dict(prefill_len=torch.zeros(2, dtype=torch.int16))),
    ('draft_tokens', dict(draft_tokens=torch.zeros(6, dtype=torch.int64))),
    ('cu_num_logits', dict(cu_num_logits=torch.zeros(2, dtype=torch.int32))),
    ('num_logits', dict(num_logits=2.0)),
    ('guard', dict(guard='no')),
    # values (the checked path: every CPU backend checks them by default)
    ('idx_mapping', dict(idx_mapping=torch.tensor([0, 2], dtype=torch.int32))),
    ('query_start_loc', dict(query_start_loc=torch.tensor([0, 1, 5], dtype=torch.int32))),
    ('query_start_loc', dict(query_start_loc=torch.tensor([0, 2, 1], dtype=torch.int32))),
    ('cu_num_logits', dict(cu_num_logits=torch.tensor([0, 2, 3], dtype=torch.int32), num_logits=3)),
    ('num_logits', dict(num_logits=3)),
    ('cu_num_logits', dict(draft_tokens=torch.zeros(2, 0, dtype=torch.int64), cu_num_logits=torch.tensor([0, 1, 3], dtype=torch.int32), num_logits=3)),
])
def test_bad_arguments_raise_value_error_naming_them(backend, name, kw):
    args = _bad(**{k: v for k, v in kw.items() if k != 'out'})
    with pytest.raises(ValueError, match=name):
        combine_sampled_and_draft_tokens(**args, out=kw.get('out'), backend=backend)

@st.composite
def any_inputs(draw):
    "Small inputs of the right types and shapes whose values are anywhere near their valid range: often invalid."
    r, pool, k, ns = draw(st.integers(0, 3)), draw(st.integers(1, 3)), draw(st.integers(0, 3)), draw(st.sampled_from([0, 1]))
    ints = lambda n, lo, hi: draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
    qsl, cu = [0], [0]
    for q in ints(r, 0, 4): qsl.append(qsl[-1] + q); cu.append(cu[-1] + draw(st.integers(0, q + 1)))
    idx = ints(r, 0, pool - 1)
    for xs in (qsl, cu):  # now and then, one offset off by up to 2
        if draw(st.integers(0, 3)) == 0: xs[draw(st.integers(0, r))] += draw(st.integers(-2, 2))
    if r and draw(st.integers(0, 3)) == 0: idx[draw(st.integers(0, r - 1))] = draw(st.sampled_from([-1, pool]))  # a slot out of range
    i32 = lambda xs: torch.tensor(xs, dtype=torch.int32)
    return dict(input_ids=i32(ints(max(qsl[-1] + draw(st.integers(-1, 2)), 0), 0, 99)), idx_mapping=i32(idx),
                last_sampled_tokens=torch.tensor(ints(pool, 100, 199)), query_start_loc=i32(qsl), seq_lens=i32(ints(r, 0, 8)),
                prefill_len=i32(ints(pool, 0, 8)), draft_tokens=torch.tensor(ints(pool * k, 200, 299), dtype=torch.int64).reshape(pool, k),
                cu_num_logits=i32(cu), num_logits=cu[-1] + draw(st.sampled_from([0, 0, 0, 1])), num_new_sampled_tokens=ns)

@given(any_inputs(), st.booleans())
def test_backends_agree_on_every_input_they_accept(kw, guard):
    "With the value check on, every backend rejects the same inputs with the same message, and agrees on the rest."
    outcomes = {}
    for be in BACKENDS_CPU:
        a = {n: v.clone() if isinstance(v, torch.Tensor) else v for n, v in kw.items()}
        try:
            li = combine_sampled_and_draft_tokens(**a, guard=guard, backend=be, check_values=True)
            outcomes[be] = (a['input_ids'].tolist(), li.tolist())
        except ValueError as e: outcomes[be] = ('rejected', str(e))
    event('accepted' if outcomes['reference'][0] != 'rejected' else 'rejected')
    assert len({repr(o) for o in outcomes.values()}) == 1, outcomes

def test_unknown_backend():
    with pytest.raises(ValueError, match='backend'): combine_sampled_and_draft_tokens(**_bad(), backend='cuda-graph')

def test_dispatch(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    assert combine_backend('cpu') == 'reference'
    monkeypatch.setenv('TRITON_INTERPRET', '1')
    assert combine_backend('cpu') == ('interpreter' if triton is not None else 'reference')
    if triton is not None: assert combine_backend('cuda') == 'triton'

def test_imports_and_runs_without_triton():
    code = ("import sys; sys.modules['triton'] = None\n"
            "from vllm_pd_spec.kernels.combine import combine_sampled_and_draft_tokens as f, combine_backend, upstream_case\n"
            "import os; os.environ['TRITON_INTERPRET'] = '1'; assert combine_backend('cpu') == 'reference'\n"
            "kw, ids, li = upstream_case(2); assert f(**kw).tolist() == li and kw['input_ids'].tolist() == ids\n"
            "from vllm_pd_spec.kernels.batches import sweep; s = sweep(5); assert s['backend'] == 'reference'\n")
    subprocess.run([sys.executable, '-c', code], check=True)

@needs_triton
def test_cpu_sweep():
    s = sweep(30, seed=3)
    assert s['backend'] == 'interpreter' and s['mismatches'] == 0 and s['fixed_overwrites'] == 0
    assert s['legacy_overwrites'] > 0

# --- on a GPU: the compiled kernel against the reference
@pytest.mark.gpu
@settings(max_examples=300)
@given(batches(device='cuda'), st.booleans())
def test_cuda_kernel_equals_reference(b, guard):
    for be in ('triton', 'torch'):
        ids, li = run_case(b, be, guard)
        ref_ids, ref_li = run_case(b, 'reference', guard)
        assert torch.equal(ids, ref_ids) and torch.equal(li, ref_li), be
        if guard: assert prompt_overwrites(b, ids) == []

@pytest.mark.gpu
@pytest.mark.parametrize('case', range(4))
def test_upstream_cases_cuda(case):
    kw, want_ids, want_li = upstream_case(case, 'cuda')
    assert combine_backend('cuda') == 'triton'
    li = combine_sampled_and_draft_tokens(**kw)
    assert kw['input_ids'].tolist() == want_ids and li.tolist() == want_li

@pytest.mark.gpu
def test_cuda_large_batch():
    import random
    for k in (1, 3, 7):
        rng = random.Random(k)
        rows = [row_spec('decode', p, p + rng.randint(0, 100), k) for p in (rng.randint(16, 4096) for _ in range(4096))]
        b = build_batch(rows, k, 1, seed=k, device='cuda', extra_slots=1025)
        for guard in (True, False):
            x, y = run_case(b, 'triton', guard), run_case(b, 'reference', guard)
            assert torch.equal(x[0], y[0]) and torch.equal(x[1], y[1])

@pytest.mark.gpu
@settings(max_examples=200)
@given(batches(device='cuda'), st.booleans())
def test_cuda_hot_path_launches_directly(b, guard):
    "The default path (no backend named, no value check): the first call of a key compiles, later ones launch directly."
    ref = run_case(b, 'reference', guard)
    for _ in range(2): assert all(torch.equal(x, y) for x, y in zip(run_case(b, None, guard), ref))
    assert set(launch_mode().values()) == {'direct'}

class _InterpretedLaunch:
    "Stands in for a cached compiled launch on a CPU: the same call, run by the interpreter."
    def __init__(self, fn, consts): self.fn, self.consts, self.direct, self.calls = fn, consts, True, 0
    def __call__(self, grid, *args):
        from vllm_pd_spec.kernels.combine import _jit
        self.calls += 1; _jit(self.fn, True)[(grid,)](*args, *self.consts)

@needs_triton
@pytest.mark.parametrize('case', range(4))
def test_hot_path_passes_the_kernel_its_arguments(monkeypatch, case):
    "The hot path (a cached key) skips every check and launches with the arguments in the kernel's order."
    from vllm_pd_spec.kernels import combine as c
    kw, want_ids, want_li = upstream_case(case)
    launch = _InterpretedLaunch(c._combine_kernel, (c._combine_block(3, 1), 1, True))
    key = c._combine_key(*(kw[a] for a in ('input_ids', 'idx_mapping', 'last_sampled_tokens', 'query_start_loc', 'seq_lens',
                                           'prefill_len', 'draft_tokens', 'cu_num_logits')), 1, True, None)
    monkeypatch.setitem(c._LAUNCHES, key, launch)
    monkeypatch.setattr(c, '_validate', lambda *a, **k: pytest.fail('the hot path ran the checks'))
    li = combine_sampled_and_draft_tokens(**kw)
    assert launch.calls == 1 and kw['input_ids'].tolist() == want_ids and li.tolist() == want_li

@pytest.mark.gpu
def test_cuda_second_call_skips_the_checks(monkeypatch):
    from vllm_pd_spec.kernels import combine as c
    kw, want_ids, want_li = upstream_case(2, 'cuda')
    combine_sampled_and_draft_tokens(**kw)
    kw2, _, _ = upstream_case(2, 'cuda')
    monkeypatch.setattr(c, '_validate', lambda *a, **k: pytest.fail('the second call ran the checks'))
    li = combine_sampled_and_draft_tokens(**kw2)
    assert kw2['input_ids'].tolist() == want_ids and li.tolist() == want_li

def test_seq_len_shorter_than_query_is_rejected_by_every_backend():
    "Found by the search above: a row with seq_len 1 and 2 query tokens; the contract refused it, the kernels did not."
    i32 = lambda xs: torch.tensor(xs, dtype=torch.int32)
    kw = dict(input_ids=i32([0, 0]), idx_mapping=i32([0, 0, 0]), last_sampled_tokens=torch.tensor([100]),
              query_start_loc=i32([0, 0, 2, 2]), seq_lens=i32([0, 1, 0]), prefill_len=i32([0]), draft_tokens=torch.tensor([[200]]),
              cu_num_logits=i32([0, 0, 2, 2]), num_logits=2, num_new_sampled_tokens=1)
    for be in BACKENDS_CPU:
        with pytest.raises(ValueError, match=r'seq_lens\[1\] = 1 is shorter'):
            combine_sampled_and_draft_tokens(**{n: v.clone() if isinstance(v, torch.Tensor) else v for n, v in kw.items()},
                                             guard=False, backend=be, check_values=True)
