"""Runner and engines with the real model: standalone equals the one-request reference loop; with every fix on, P/D
is lossless and has per-position acceptance parity (float64), through the fused input kernel's reference and its
interpreted Triton form; each legacy consequence shows up (fix 5: 0.27.1's rule on a decode step trimmed to one token,
0.24.0's on a padded prompt tail; fix 6: accuracy with a padded EAGLE tail; fix 2: acceptance never above standalone,
lossless); the block table's rows persist past a new occupant's blocks."""
import pytest, torch
from vllm_pd_spec.config import Fixes, SchedulerConfig, CacheConfig, RunnerConfig
from vllm_pd_spec.engine.llm_engine import LLMEngine, PDPair, StepObserver, make_config
from vllm_pd_spec.model.drafters import load_model, spec_decode
from vllm_pd_spec.model.data import make_prompts, exact_match
from vllm_pd_spec.engine.request import Request

@pytest.fixture(scope='module')
def m32(): return load_model()

@pytest.fixture(scope='module')
def examples(): return make_prompts(5, seed=303)

def _acc(examples, outs): return sum(exact_match(e.answer, o) for e, o in zip(examples, outs)) / len(examples)

@pytest.mark.parametrize('method', [None, 'mtp', 'eagle', 'dflash'])
def test_standalone_matches_reference(m32, examples, method):
    eng = LLMEngine(make_config(method, 3, model=m32, scheduler_config=SchedulerConfig(max_num_batched_tokens=24)), m32)
    outs = eng.generate([e.prompt for e in examples[:4]], 8)
    assert outs == [spec_decode(m32, e.prompt, 8)[0] for e in examples[:4]]

@pytest.mark.parametrize('method,k', [('mtp', 2), ('mtp', 4), ('eagle', 3), ('dflash', 3), (None, 1)])
def test_pd_lossless_and_parity_float64(examples, method, k):
    m = load_model(dtype=torch.float64)
    prompts = [e.prompt for e in examples]
    sa = LLMEngine(make_config(method, k, model=m), m, dtype=torch.float64)
    pd = PDPair(method, k, model=m, dtype=torch.float64)
    assert pd.generate(prompts, 8) == sa.generate(prompts, 8)
    assert pd.spec_stats.num_accepted_tokens_per_pos == sa.spec_stats.num_accepted_tokens_per_pos

@pytest.fixture(scope='module')
def m64(): return load_model(dtype=torch.float64)

def test_fix5_off_breaks_a_decode_step_trimmed_to_one_token(m64):
    "0.27.1's rule (fix 5 off) runs a draftless decode step from the first GDN slot: requests that reach max_model_len differ."
    prompts = [e.prompt for e in make_prompts(8, seed=303)]
    sc = SchedulerConfig(max_model_len=max(map(len, prompts)) + 6)
    sa = LLMEngine(make_config('mtp', 1, model=m64, scheduler_config=sc), m64, dtype=torch.float64).generate(prompts, 12)
    pd = lambda fixes: PDPair('mtp', 1, fixes, m64, scheduler_config=sc, dtype=torch.float64).generate(prompts, 12)
    assert pd(Fixes()) == sa and pd(Fixes().off(5)) != sa

def test_pre_47466_rule_breaks_the_padded_tail(m64):
    "0.24.0's rule runs the one-token tail padded with a placeholder draft through the prefill path."
    prompts = [e.prompt for e in make_prompts(5, seed=303)]
    sa = LLMEngine(make_config('mtp', 1, model=m64), m64, dtype=torch.float64).generate(prompts, 8)
    assert PDPair('mtp', 1, model=m64, dtype=torch.float64, runner_config=RunnerConfig(gdn_rule='0.24.0')).generate(prompts, 8) != sa
    assert PDPair('mtp', 1, model=m64, dtype=torch.float64, runner_config=RunnerConfig(gdn_rule='0.33.0 V1')).generate(prompts, 8) == sa

def test_interpreted_kernel_lossless(m64, examples):
    "The runner's inputs through Triton's interpreter: P/D equals standalone (reference backend)."
    pytest.importorskip('triton')
    prompts = [e.prompt for e in examples[:2]]
    sa = LLMEngine(make_config('mtp', 2, model=m64), m64, dtype=torch.float64).generate(prompts, 4)
    pd = PDPair('mtp', 2, model=m64, dtype=torch.float64, runner_config=RunnerConfig(input_backend='interpreter'))
    assert pd.D.runner.input_backend == 'interpreter' and pd.generate(prompts, 4) == sa

def test_runner_arguments_are_checked(m32):
    with pytest.raises(ValueError, match='input_backend'): RunnerConfig(input_backend='cuda')
    with pytest.raises(ValueError, match='gdn_rule'): RunnerConfig(gdn_rule='0.30.0')
    with pytest.raises(ValueError, match="'triton' only with device='cuda'"):  # the device is the engine's: checked when the runner is built
        LLMEngine(make_config('mtp', 2, model=m32, runner_config=RunnerConfig(input_backend='triton')), m32)
    with pytest.raises(TypeError): LLMEngine(make_config('mtp', 2, model=m32), m32, gdn_rule='0.24.0')  # a switch is a config field, not an argument

def test_next_prefill_rows_follow_the_lookahead_contract(m32):
    from vllm_pd_spec.contracts import lookahead
    fixed, legacy = (LLMEngine(make_config('mtp', 3, fixes=f, model=m32), m32).runner for f in (Fixes(), Fixes().off(1)))
    spec = fixed.cfg.speculative_config
    assert fixed.next_prefill_tokens.shape[0] == lookahead.runner_prefill_lookahead(lookahead.num_prefill_lookahead_tokens(spec))
    assert legacy.next_prefill_tokens.shape[0] == lookahead.legacy_runner_prefill_lookahead(spec)

def test_block_table_rows_persist(m32):
    "A new occupant of a runner slot overwrites its row from the start; entries past its blocks keep the old ids."
    eng = LLMEngine(make_config('mtp', 1, model=m32, scheduler_config=SchedulerConfig(max_num_seqs=1)), m32)
    eng.add_request(Request('long', [1 + i % 20 for i in range(59)], max_tokens=2)); eng.step()
    slot = eng.runner.requests['long'].slot
    eng.run(); row = eng.runner.block_table[slot].clone()
    eng.add_request(Request('short', [2 + i % 20 for i in range(9)], max_tokens=2)); eng.step()
    r = eng.runner.requests['short']
    assert r.slot == slot  # the slot freed last is taken first (upstream: `free_indices.pop()`)
    n = len(r.block_ids[eng.runner.attn_group])
    assert eng.runner.block_table[r.slot, :n].tolist() == list(r.block_ids[eng.runner.attn_group])
    assert eng.runner.block_table[r.slot, n:4].tolist() == row[n:4].tolist() and row[n:4].ne(0).all()

def test_fix6_off_drops_accuracy(m32, examples):
    prompts = [e.prompt for e in examples]
    fixed, legacy = PDPair('eagle', 3, model=m32).generate(prompts, 8), PDPair('eagle', 3, Fixes().off(6), m32).generate(prompts, 8)
    assert _acc(examples, fixed) == 1.0 and _acc(examples, legacy) < _acc(examples, fixed)

def test_fix2_off_lossless_acceptance_not_above(m32, examples):
    prompts = [e.prompt for e in examples]
    sa = LLMEngine(make_config('mtp', 3, model=m32), m32); scheduler_output = sa.generate(prompts, 8)
    pd = PDPair('mtp', 3, Fixes().off(2), m32)
    assert pd.generate(prompts, 8) == scheduler_output
    assert pd.spec_stats.mean_acceptance_length <= sa.spec_stats.mean_acceptance_length

@pytest.mark.gpu
def test_pd_lossless_cuda(examples):
    m = load_model(device='cuda')
    prompts = [e.prompt for e in examples[:4]]
    sa = LLMEngine(make_config('mtp', 3, model=m), m, device='cuda')
    pd = PDPair('mtp', 3, model=m, device='cuda')
    assert pd.generate(prompts, 8) == sa.generate(prompts, 8)
    assert pd.spec_stats.num_accepted_tokens_per_pos == sa.spec_stats.num_accepted_tokens_per_pos

@pytest.mark.parametrize('method', [None, 'mtp'])
def test_preemption_and_prefix_hits_lossless(m32, method):
    "Few KV blocks force preemption; a resumed request's local prefix hit restores the GDN state kept per block."
    ex = make_prompts(8, seed=8)
    eng = LLMEngine(make_config(method, 3, model=m32, scheduler_config=SchedulerConfig(max_num_batched_tokens=32),
                                cache_config=CacheConfig(num_gpu_blocks=10)), m32)
    preempted = []
    eng.add_observer(StepObserver(on_schedule=lambda scheduler_output: preempted.extend(scheduler_output.preempted_req_ids)))
    assert eng.generate([e.prompt for e in ex], 12) == [spec_decode(m32, e.prompt, 12)[0] for e in ex]
    assert preempted

def test_shared_prefix_lossless(m32, examples):
    "Requests sharing a 32-token prefix hit each other's cached blocks (KV and GDN state)."
    base = examples[0].prompt[:1] + [10 + i % 16 for i in range(31)]
    prompts = [base + e.prompt[1:] for e in examples[:3]]
    eng = LLMEngine(make_config('eagle', 3, model=m32), m32)
    got = []
    for i, p in enumerate(prompts):  # one after another, so later ones hit the earlier ones' blocks
        eng.add_request(Request(f's{i}', p, max_tokens=8))
        while eng.has_work(): eng.step()
        got.append(eng.outputs[f's{i}'])
    assert got == [spec_decode(m32, p, 8)[0] for p in prompts]
    # EAGLE drops the hit's last block (its drafter KV read the token after the shared prefix): 16 of the 32 tokens
    assert eng.scheduler.requests == {} and max(eng.finished[f's{i}'].num_cached_tokens for i in range(1, 3)) == 16


def test_engine_leaves_the_callers_model_where_it_was():
    "Building a float64 engine from a float32 model must not move that model (another engine may be using it)."
    import torch
    from vllm_pd_spec.engine.llm_engine import LLMEngine, make_config
    from vllm_pd_spec.model.drafters import load_model
    m = load_model()
    e32 = LLMEngine(make_config('mtp', 3), m)
    LLMEngine(make_config('mtp', 3), m, dtype=torch.float64)
    assert next(m.parameters()).dtype == torch.float32
    from vllm_pd_spec.model.data import make_prompts
    out, = e32.generate([make_prompts(1, seed=0)[0].prompt], max_tokens=2)
    assert len(out) == 2

def test_pd_recomputes_a_failed_load_lossless_float64(examples):
    "Engine II over a transport whose second read fails verification: D recomputes that prompt, outputs equal standalone."
    from vllm_pd_spec.engine.transport import LocalTransport
    class FlipSecondRead(LocalTransport):
        n = 0
        def read_blocks(self, *a):
            rec = super().read_blocks(*a)
            if rec is not None:
                self.n += 1
                if self.n == 2: k = next(iter(rec.dst_digests)); rec.dst_digests[k] = 'flipped'
            return rec
    m = load_model(dtype=torch.float64)
    prompts = [e.prompt for e in examples[:3]]
    sa = LLMEngine(make_config('mtp', 3, model=m), m, dtype=torch.float64)
    pd = PDPair('mtp', 3, model=m, dtype=torch.float64, transport=FlipSecondRead())
    assert pd.generate(prompts, 8) == sa.generate(prompts, 8)
    assert pd.D.scheduler.num_recomputed_loads == 1 and len(pd.D.runner.worker.failures) == 1
    assert pd.P.scheduler.kv_cache_manager.get_num_free_blocks() == pd.D.scheduler.kv_cache_manager.get_num_free_blocks()

def test_engine_takes_its_connector_worker():
    "`LLMEngine(worker=...)` uses the worker it is given (no class swap after construction)."
    from vllm_pd_spec.engine.transport import LocalTransport, PDConnectorWorker
    m = load_model()
    w = PDConnectorWorker('decode-0', LocalTransport())
    eng = LLMEngine(make_config('mtp', 3, 'decode', model=m), m, worker=w)
    assert eng.runner.worker is w and eng.worker is w

def test_engine_steps_any_runner_and_calls_observers_in_order():
    "`LLMEngine(runner=ToyRunner)`: no model; an observer sees each step before the runner and after the update."
    from vllm_pd_spec.config import LayerSpec, ModelConfig, SpeculativeConfig, VllmConfig
    from vllm_pd_spec.engine.toy_runner import ToyRunner
    eng = LLMEngine(VllmConfig(SpeculativeConfig('eagle', 2), ModelConfig((LayerSpec('full_attention'),), block_size=4)),
                    runner=ToyRunner)
    seen = []
    eng.add_observer(StepObserver(on_schedule=lambda scheduler_output: seen.append(('schedule', scheduler_output.total_num_scheduled_tokens)),
                                  on_output=lambda scheduler_output, mro, outs: seen.append(('output', sum(len(o.new_token_ids) for o in outs)))))
    assert eng.generate([list(range(6))], max_tokens=7) == [[7] * 7]
    assert seen == [('schedule', 6), ('output', 1), ('schedule', 3), ('output', 3), ('schedule', 3), ('output', 3)]
    with pytest.raises(ValueError, match='worker'): ToyRunner(eng.scheduler, worker=object())

def test_row_sampled_from_p_record_feeds_the_next_step():
    "MTP k=1: P computes the whole prompt, D samples its first token from P's hidden state; the kernel's buffers follow."
    import torch
    from vllm_pd_spec.config import Fixes
    from vllm_pd_spec.engine.llm_engine import LLMEngine, PDPair, make_config
    from vllm_pd_spec.model.drafters import load_model
    from vllm_pd_spec.model.corpus import heldout_prompts
    m, prompts = load_model('text-attn', torch.float64), heldout_prompts(2, prompt_len=48)
    ref = LLMEngine(make_config('mtp', 1, model=m), m, dtype=torch.float64).generate(prompts, 8)
    assert PDPair('mtp', 1, Fixes(), m, dtype=torch.float64, runner_config=RunnerConfig(handoff=True)).generate(prompts, 8) == ref

def test_drafter_rows_live_per_slot_and_persist(m64, examples):
    "D's padded first step re-prefills k - 1 rows its request never wrote; 'reset on add' (ours) never does; standalone never does."
    prompts = [e.prompt for e in examples[:4]]
    seen = {}
    for state in ('slot', 'reset on add'):
        stale = {}
        pd = PDPair('mtp', 3, Fixes().off(2), m64, dtype=torch.float64, scheduler_config=SchedulerConfig(max_num_seqs=1),
                    runner_config=RunnerConfig(reprefill_state=state))
        pd.D.add_observer(StepObserver(on_stale_reprefill=lambda rid, pos, stale=stale: stale.setdefault(rid, []).append(list(pos))))
        seen[state] = (pd.generate(prompts, 6), stale, pd.D.runner)
    outs, stale, runner = seen['slot']
    mtp = runner.speculator  # the drafter's per-slot rows are its speculator's
    assert outs == seen['reset on add'][0]                                   # lossless either way (greedy)
    assert {rid: p for rid, p in stale.items()} == {f'req-{i}': [list(range(len(p) - 3, len(p) - 1))] for i, p in enumerate(prompts)}
    assert seen['reset on add'][1] == {} and mtp.cached_draft_input_ids.shape == (mtp.cached_draft_input_ids.shape[0], 2)
    assert mtp.cached_target_hidden_states.abs().sum() > 0                # the rows outlive their requests: nothing clears them
    sa = LLMEngine(make_config('mtp', 3, model=m64), m64, dtype=torch.float64)
    sa.add_observer(StepObserver(on_stale_reprefill=lambda rid, pos: stale.setdefault('standalone', []).append(rid)))
    sa.generate(prompts, 6)
    assert 'standalone' not in stale
