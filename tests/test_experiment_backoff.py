"Fix 2 on the engine: the taint census equals the contract, the hand-off and the rejection sampler keep the engine lossless."
import collections, functools, torch
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from vllm_pd_spec.contracts import backoff as B
from types import SimpleNamespace
from vllm_pd_spec.config import SamplingParams
from vllm_pd_spec.engine.runner import ModelRunner, _draw, _generator
from vllm_pd_spec.experiments import backoff as X
from vllm_pd_spec.experiments.common import torch_threads
from vllm_pd_spec.model.drafters import model_prompts
from vllm_pd_spec.model.drafters import load_model

@pytest.fixture(autouse=True)
def one_thread():
    "Tiny matrices: one torch thread is several times faster than many (as the experiments run)."
    with torch_threads(1): yield

@functools.lru_cache(None)
def model(name='text-attn'): return load_model(name, torch.float64)

@functools.lru_cache(None)
def prompts(n:int, count:int=2, name:str='text-attn'): return tuple(tuple(p) for p in model_prompts(name, count, n))

def census_vs_contract(arm:str, k:int, n:int, b:int, temperature:float=0.0, name:str='text-attn', count:int=2,
                       max_num_seqs:int|None=None)->tuple:
    "Serve `count` prompts of `n` tokens in `arm` with backoff `b` on both sides; (census per request, contract per request)."
    ps = [list(p) for p in prompts(n, count, name)]
    with torch.no_grad():
        run = X.serve_arm(arm, model(name), k, ps, max_tokens=k + 3, sampling=SamplingParams(temperature, 7),
                      backoff=lambda has_mamba, L: b, max_num_seqs=max_num_seqs or count)
    got, want = [], []
    for i, p in enumerate(ps):
        tokens = p + run['outputs'][i]
        got.append(X.census(run['kv'][f'req-{i}'], X.reference_drafter_kv(model(name), tokens, n, k)))
        e = X.num_matched(run['continuation'][f'req-{i}'], tokens, B.remote_prefill_token_count(n, run['backoff']), k)
        want.append(X.predicted(n, k, run['backoff'], run['handoff_window'], e, reset_on_add=run['reset_on_add'],
                                num_rejected=run['log'].first_rejected(f'req-{i}')))
    return got, want

@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(['legacy', 'backoff', 'reset on add', 'handoff', 'backoff+handoff']), st.integers(2, 4), st.integers(6, 40),
       st.integers(0, 5), st.sampled_from([0.0, 1.0]), st.sampled_from([1, 2]))
def test_census_equals_contract(arm, k, n, b, temperature, max_num_seqs):
    "Over k, N, the backoff b, the arm and slot reuse (one request at a time reuses the last slot): the differing entries are the contract's."
    got, want = census_vs_contract(arm, k, n, b, temperature, count=2 if max_num_seqs == 2 else 3, max_num_seqs=max_num_seqs)
    for g, w in zip(got, want): assert torch.equal(g, w), (g.nonzero().tolist(), w.nonzero().tolist())

def test_census_equals_contract_hybrid():
    "The same on the hybrid target: 0.33.0's backoff (GDN: at least 1) and the prototype (P computes every token, ships h(N))."
    for arm, b in (('backoff', 2), ('handoff', 0), ('legacy', 1)):
        got, want = census_vs_contract(arm, 3, 24, b, name='text-hybrid')
        for g, w in zip(got, want): assert torch.equal(g, w), (arm, g.nonzero().tolist(), w.nonzero().tolist())

def test_stale_reprefill_reaches_module_0():
    "D's padded first step re-prefills k - 1 positions from the slot's rows (a previous occupant's, or zeros): every module differs there."
    k, n = 3, 32
    for max_num_seqs in (1, 3):          # one at a time: each request takes the slot its predecessor left; three: fresh zero rows
        got, want = census_vs_contract('legacy', k, n, 0, count=3, max_num_seqs=max_num_seqs)
        for g, w in zip(got, want):
            assert torch.equal(g, w) and g[0, n - k:n - 1].all() and not g[0, n - 1] and g[1:, n - k:].all()
    got, want = census_vs_contract('reset on add', k, n, 1, count=3, max_num_seqs=1)  # ours, where a backoff of 1 pads: nothing stale
    assert B.stale_reprefill_tokens(n, k - 1, 1) == 2 and all(torch.equal(g, w) and not g[0, n - k] for g, w in zip(got, want))

def test_short_tail_leaves_rows_unwritten():
    "A backoff of 2 under k = 4 leaves D a 2-token first window: it writes 2 of 3 rows, and a first decode step rejecting 4 reaches the third."
    got, want = census_vs_contract('legacy', 4, 32, 2, count=3, max_num_seqs=1)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    assert B.stale_reprefill_tokens(32, 3, 2) == 1 and B.stale_reprefill_tokens(32, 3, 2, num_rejected=3) == 0

def test_census_sees_the_taint():
    "The census is not vacuous: 0.33.0's backoff leaves entries that differ, where the contract says."
    got, want = census_vs_contract('backoff', 3, 32, 2, count=4)
    assert sum(int(g.sum()) for g in got) > 0 and all(torch.equal(g, w) for g, w in zip(got, want))

def test_handoff_is_lossless_and_clean():
    "Every arm gives standalone's outputs (greedy, float64); standalone and both hand-off arms leave no taint."
    ps = [list(p) for p in prompts(48, 3)]
    res = X.run_setting('text-attn', 3, ps, max_tokens=12)
    assert all(r['lossless'] for r in res.values())
    assert res['standalone']['tainted_entries'] == res['handoff']['tainted_entries'] == res['backoff+handoff']['tainted_entries'] == 0
    assert all(not r['contract_mismatches'] for r in res.values())

def test_clean_arms_sample_standalone_tokens():
    "At temperature 1, an arm whose drafter KV is clean draws exactly standalone's tokens (every draw is keyed by position)."
    ps = [list(p) for p in prompts(40, 2)]
    res = X.run_setting('text-attn', 2, ps, temperature=1.0, seed=3, max_tokens=16, arms=('standalone', 'handoff', 'backoff+handoff'))
    assert res['handoff']['identical_outputs'] and res['backoff+handoff']['identical_outputs']

def test_rejection_sampler_is_lossless_in_distribution():
    "vLLM's rule with a one-hot draft: the token at a position is distributed as p_target, whatever the draft."
    p = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
    logits = p.log()[None].repeat(2, 1)  # one draft, then the bonus row
    runner = SimpleNamespace(sampling=SamplingParams(1.0, 11))  # all `_rejection_sample` reads
    n = 4000
    for draft in (0, 3):  # a likely and an unlikely draft
        counts = collections.Counter(ModelRunner._rejection_sample(runner, f'r{i}', 10, [draft], logits)[0][0] for i in range(n))
        chi2 = sum((counts[t] - n * p[t].item()) ** 2 / (n * p[t].item()) for t in range(4))
        assert chi2 < 16.3, (draft, counts)  # 3 degrees of freedom, p = 0.001

def test_draws_are_keyed():
    "The same (seed, request, position, purpose) gives the same draw; another position another."
    w = torch.ones(50, dtype=torch.float64)
    assert _draw(w, _generator(0, 'r', 5, 'sample')) == _draw(w, _generator(0, 'r', 5, 'sample'))
    assert len({_draw(w, _generator(0, 'r', pos, 'sample')) for pos in range(20)}) > 5

def test_sampling_params_are_checked():
    with pytest.raises(ValueError, match='temperature'): SamplingParams(-1.0)
    with pytest.raises(TypeError, match='temperature'): SamplingParams('hot')
    with pytest.raises(TypeError, match='seed'): SamplingParams(1.0, 1.5)

def test_eagle_on_gdn_keeps_one_entry():
    "EAGLE on the hybrid target: 0.33.0's backoff (1) leaves P's one guess-derived entry at N - 2 where P guessed x_{N-1} wrong; census = contract."
    name, k, n = 'text-hybrid', 3, 24
    ps = [list(p) for p in prompts(n, 4, name)]
    wrong = None
    for arm in ('backoff', 'standalone'):
        with torch.no_grad(): run = X.serve_arm(arm, model(name), k, ps, max_tokens=k + 3, method='eagle', max_num_seqs=4)
        res = X.taint(run, model(name), ps, k)
        assert run['num_modules'] == 1 and not res['contract_mismatches'] and res['stale_reprefill_entries'] == 0, res
        if arm == 'backoff':
            assert run['backoff'] == 1
            wrong = sum(run['continuation'][f'req-{i}'][0] != p[n - 1] for i, p in enumerate(ps))  # P's guess of x_{N-1}
            assert res['tainted_entries'] == res['requests_tainted'] == wrong > 0
        else: assert res['tainted_entries'] == 0
    assert B.tainted_entries(n, 1, 1) == 1 and B.tainted_entries(n, 1, 1, num_matched=1) == 0

def test_arguments_are_checked():
    "Each bad argument is refused by config's one check, naming the field."
    for call, field in ((lambda: X.prompt_set('text-attn', 3, 2), 'seed=3'), (lambda: X.run_setting('text-attn', 2, [[1]], arms=('legacy',)), 'arms='),
                        (lambda: X.run(temperatures=(0.0,)), 'temperatures='), (lambda: X.run_settings([], 1, processes=0), 'processes=0')):
        with pytest.raises(ValueError, match=f'^{field}.* is invalid: must be'): call()
