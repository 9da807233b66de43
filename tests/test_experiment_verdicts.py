"Every verdict can fail: each fix's fixed form swapped for its legacy form turns that fix's row to 'no' and `reproduce` non-zero; the verdict helpers' negative branches."
import json
import pytest
import vllm_pd_spec.contracts.backoff as B
import vllm_pd_spec.contracts.lookahead as LA
import vllm_pd_spec.contracts.rows as R
import vllm_pd_spec.contracts.slots as S
import vllm_pd_spec.engine.runner as runner_mod
from vllm_pd_spec.engine.connector import PDConnectorScheduler
from vllm_pd_spec.experiments import common as K
from vllm_pd_spec.experiments.common import ExperimentResult, torch_threads

def _legacy_ordering(monkeypatch):
    "The connector truncates as 0.27.1 does (after the prefix lookup) while the engine's fix switch says on."
    init = PDConnectorScheduler.__init__
    def legacy_init(self, *a, **kw):
        init(self, *a, **kw)
        self.fixes = self.fixes.off('truncation_ordering')
    monkeypatch.setattr(PDConnectorScheduler, '__init__', legacy_init)

def _legacy_guard(monkeypatch):
    "The input kernel assembles with the legacy guard while the engine's fix switch says on."
    assemble = runner_mod.assemble_inputs
    monkeypatch.setattr(runner_mod, 'assemble_inputs', lambda *a, guard=True, **kw: assemble(*a, guard=False, **kw))

SWAPS = {  # fix: put its legacy form where the engine calls the fixed one
    1: lambda mp: mp.setattr(LA, 'num_prefill_lookahead_tokens', LA.legacy_scheduler_prefill_lookahead),
    2: lambda mp: mp.setattr(B, 'prefill_backoff', lambda has_mamba, lookahead, bounded_replay=False: B.legacy_prefill_backoff(has_mamba)),
    3: _legacy_ordering,
    4: lambda mp: mp.setattr(S, 'num_lookahead_tokens', S.legacy_num_lookahead_tokens),
    5: lambda mp: mp.setitem(R.ROW_RULES, R.FIXED_ROW_RULE, R.ROW_RULES[R.LEGACY_ROW_RULE]),
    6: _legacy_guard,
}

@pytest.mark.parametrize('fix', sorted(SWAPS))
def test_legacy_form_in_the_fixed_arm_says_no(fix, monkeypatch, tmp_path, capsys):
    "With the fixed form swapped for the legacy one, the fix's row says 'invariant held: no' and `reproduce` exits non-zero."
    from vllm_pd_spec.cli import main
    SWAPS[fix](monkeypatch)
    out = tmp_path/'r.json'
    with torch_threads(1): rc = main(['reproduce', '--fix', str(fix), '--quick', '--json', str(out)])
    (r,) = json.loads(out.read_text())
    assert rc != 0 and not r['invariant_holds'], r['invariant']
    assert 'invariant held: no' in capsys.readouterr().out

def test_lossless_sees_one_token():
    "A run of the reference's lengths with one token changed is not lossless."
    assert K.lossless([[1, 2], [3, 4]], [[1, 2], [3, 4]]) == dict(requests_differing=0, lossless=True)
    assert K.lossless([[1, 2], [3, 5]], [[1, 2], [3, 4]]) == dict(requests_differing=1, lossless=False)

def test_direction_needs_the_interval():
    "'yes' only where the paired 95% interval excludes 0 in the seed's direction; equal figures and a wide interval decide nothing."
    import vllm_pd_spec.reproduce as REP
    direction_reproduced, invariant_verdict = REP.direction_reproduced, REP.invariant_verdict
    r = lambda paired, **kw: ExperimentResult(**dict(fix=2, name='x', metric='m', legacy=2.5, fixed=2.6, invariant='-', invariant_holds=True,
                                                     legacy_consequence_seen=True, paired=paired) | kw)
    assert direction_reproduced(r(K.paired_diff([2.6, 2.7, 2.65], [2.5, 2.55, 2.5]))) == 'yes'
    assert direction_reproduced(r(K.paired_diff([2.5, 2.5, 2.5], [2.5, 2.5, 2.5]))).startswith('not decided')
    assert direction_reproduced(r(K.paired_diff([2.9, 2.1, 2.8], [2.5, 2.5, 2.5]))).startswith('not decided')
    assert direction_reproduced(r(K.paired_diff([2.4, 2.45, 2.4], [2.5, 2.55, 2.5]))).startswith('no')
    assert direction_reproduced(r(None, fix=1)).startswith('—')
    assert invariant_verdict(r(None)) == 'yes' and invariant_verdict(r(None, invariant_holds=False)) == 'no'
    assert K.decides(dict(mean=0.1, ci95=0.1, n=5, over='requests'), 'higher').startswith('not decided')  # the interval touches 0

def test_fixed_engine_runs_the_fixed_row_rule():
    "The runner's fix-5 switch: the fixed engine classifies rows by 0.33.0's rule, the legacy one by 0.27.1's."
    import torch
    from vllm_pd_spec.config import Fixes
    from vllm_pd_spec.engine.llm_engine import LLMEngine, make_config
    from vllm_pd_spec.model.drafters import load_model
    m = load_model('text-hybrid', torch.float64)
    for fixes, rule in ((Fixes(), R.FIXED_ROW_RULE), (Fixes().off('gdn_decode_detection'), R.LEGACY_ROW_RULE)):
        assert LLMEngine(make_config('mtp', 1, fixes=fixes, model=m), m, dtype=torch.float64).runner.gdn_rule == rule

def test_resumed_hybrid_request_keeps_its_outputs():
    "A preempted request resumes with its outputs in the prefill (`prefill_len` > `prompt_len`): the hybrid target's MTP outputs still equal a run without a drafter."
    import torch
    from vllm_pd_spec.experiments.common import Arm, serve
    from vllm_pd_spec.model.drafters import load_model, model_prompts
    m, ps = load_model('text-hybrid', torch.float64), model_prompts('text-hybrid', 3, 40)
    with torch_threads(1):
        ref = serve(Arm('no drafter', role='reference', pd=False), m, ps, method=None, max_tokens=24).outputs
        eng = _preempting_engine(m)
        for i, p in enumerate(ps): eng.add_request(__import__('vllm_pd_spec.engine.request', fromlist=['Request']).Request(f'r{i}', p, max_tokens=24))
        preempted = set()
        from vllm_pd_spec.engine.llm_engine import StepObserver
        eng.add_observer(StepObserver(on_schedule=lambda so: preempted.update(so.preempted_req_ids)))
        eng.run()
    assert preempted, 'the pool was meant to preempt'
    assert [eng.outputs[f'r{i}'] for i in range(len(ps))] == ref

def _preempting_engine(model):
    "A standalone MTP engine on the hybrid target whose block pool is too small for three requests at once."
    import torch
    from vllm_pd_spec.config import SchedulerConfig, CacheConfig
    from vllm_pd_spec.engine.llm_engine import LLMEngine, make_config
    cfg = make_config('mtp', 2, model=model, scheduler_config=SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=3),
                      cache_config=CacheConfig(num_gpu_blocks=12))
    return LLMEngine(cfg, model, dtype=torch.float64)
