"""Mutation test: hand-made mutants of the six contracts' fixed forms, the kernel guard, the scheduler's assertion and padding,
the runner's row rule and fix-5 switch, the connector's backoff and truncation, the lossless check and the verdict
functions, each put in place in this process (a function replaced, or its source edited and recompiled) and run against
small forms of the experiments' own verdicts and the verdict tests. The test fails if any non-equivalent mutant survives;
the equivalent ones are named in `EQUIVALENT` with the reason."""
import inspect, textwrap
import pytest, torch
import vllm_pd_spec.contracts.backoff as B
import vllm_pd_spec.contracts.lookahead as LA
import vllm_pd_spec.contracts.ordering as O
import vllm_pd_spec.contracts.rows as R
import vllm_pd_spec.contracts.slots as S
import vllm_pd_spec.contracts.guard as G
import vllm_pd_spec.engine.runner as RM
import vllm_pd_spec.engine.scheduler as SM
import vllm_pd_spec.engine.connector as CM
import vllm_pd_spec.kernels.assemble as KA
import vllm_pd_spec.kernels.combine as KC
import vllm_pd_spec.experiments.common as K
import vllm_pd_spec.reproduce as REP
from vllm_pd_spec.config import Fixes
from vllm_pd_spec.experiments.common import Arm, serve, torch_threads
from vllm_pd_spec.model.drafters import load_model, model_prompts
import test_contracts_rows, test_experiment_verdicts as V

# ---- the killers: small forms of each experiment's verdicts (both: the fixed arm holds its invariant, the legacy arm shows the mechanism)

def fix1()->bool:
    from vllm_pd_spec.experiments import lookahead as X
    rows = X.reserve_rows(ks=(3,), num_prompts=2, max_tokens=8) + X.window_rows(ks=(3,), lengths=range(8, 16))
    return X.verdict(rows) and all(r['legacy_short_chunks'] > 0 for r in rows if r['consumer'] == 'scheduler') \
        and all(r['legacy'] > 0 for r in rows if r['consumer'] == 'kv_cache_planner')

def fix2()->bool:
    from vllm_pd_spec.experiments import backoff as X
    rows = list(X.run_setting('text-attn', 3, model_prompts('text-attn', 3, 48), max_tokens=10, arms=('standalone', 'legacy', 'backoff'),
                              max_num_seqs=2).values())
    by = {r['arm']: r for r in rows}
    return all(X._engine_checks(rows).values()) and by['backoff']['invariant'] and not by['legacy']['invariant'] \
        and by['legacy']['stale_reprefill_entries'] > 0

def fix3()->bool:
    from vllm_pd_spec.experiments import ordering as X
    rows = X.pair_rows(lengths=range(2, 34), block_sizes=(4,), extra=()) + X.stream_rows(block_sizes=(4,), num_requests=30)
    return all(r['fixed_deaths'] == 0 for r in rows) and all(r['agree'] == r['of'] for r in rows if 'agree' in r) \
        and all(r['legacy_deaths'] > 0 for r in rows)

def fix4()->bool:
    from vllm_pd_spec.experiments import slots as X
    r = X.compare(3, X.shared_prefix_prompts(X.NUM_REQUESTS, 0), load_model('text-attn', torch.float64), max_tokens=X.MAX_TOKENS,
                  num_blocks=X.NUM_BLOCKS, max_num_seqs=X.MAX_NUM_SEQS)
    return r['fixed_writes_outside'] == r['fixed_victims'] == 0 and r['fixed_outputs_lossless'] and r['legacy_writes_outside'] > 0

def fix5()->bool:
    from vllm_pd_spec.experiments import rows as X
    rows = X.rule_rows(ks=(1,), rules=('0.27.1', '0.33.0 V2'), settings=('runs into max_model_len',), num_prompts=8)
    test_contracts_rows.test_truth_table()
    return X.verdict(rows) and any(r['differing'] > 0 for r in rows if r['arm'] == '0.27.1')

def fix6()->bool:
    from vllm_pd_spec.experiments import guard as X
    m, ps = load_model('text-attn', torch.float64), model_prompts('text-attn', 2, 32)
    rows = X.guard_case('text-attn', 1, ps, max_tokens=12, model=m)
    ref = serve(X.NO_SPEC, m, ps, method=None, max_tokens=12).outputs
    by_reference = serve(X.ARMS['fixed'], m, ps, k=1, max_tokens=12, runner_switches=dict(input_backend='reference')).outputs  # the guard's contract form
    return X.verdict(rows) and any(r['differing'] > 0 for r in rows if r['arm'] == 'legacy') and by_reference == ref

def verdicts()->bool:
    V.test_lossless_sees_one_token(); V.test_direction_needs_the_interval(); V.test_fixed_engine_runs_the_fixed_row_rule()
    return True

KILLERS = dict(fix1=fix1, fix2=fix2, fix3=fix3, fix4=fix4, fix5=fix5, fix6=fix6, verdicts=verdicts)

# ---- the mutants: (name, the killers that must see it, how it is put in place)

def edit(mp, owner, name:str, old:str, new:str):
    "Replace `owner.name` by its own source with `old` changed to `new`, compiled in its module's globals (decorators other than Triton's dropped)."
    fn = getattr(owner, name)
    src = textwrap.dedent(inspect.getsource(fn))
    assert src.count(old) == 1, (name, old)
    src = '\n'.join(l for l in src.replace(old, new).splitlines() if not l.startswith('@'))
    g = dict(fn.__globals__)
    exec(compile(src, f'<mutant of {name}>', 'exec'), g)
    mp.setattr(owner, name, g[fn.__name__])
    return g[fn.__name__]

def v2_rule(mp, old, new):
    "Edit 0.33.0's V2 row rule where the engine finds it (`ROW_RULES`)."
    f = edit(mp, R, 'num_decode_draft_tokens_v2_0330', old, new)
    mp.setitem(R.ROW_RULES, '0.33.0 V2', (f, R.ROW_RULES['0.33.0 V2'][1]))

def runner_switch_inverted(mp):
    init = RM.ModelRunner.__init__
    def mutant(self, *a, **kw):
        init(self, *a, **kw)
        if kw.get('gdn_rule') is None: self.gdn_rule = R.fixes_row_rule(not self.fixes.gdn_decode_detection)
    mp.setattr(RM.ModelRunner, '__init__', mutant)

MUTANTS = [
    # fix 1: the lookahead contract
    ('num_prefill_lookahead_tokens: k - 1 for multi-module MTP', ('fix1',),
     lambda mp: edit(mp, LA, 'num_prefill_lookahead_tokens', 'return spec.num_speculative_tokens if', 'return spec.num_speculative_tokens - 1 if')),
    ('num_prefill_lookahead_tokens: the 0.27.1 scheduler form', ('fix1',),
     lambda mp: mp.setattr(LA, 'num_prefill_lookahead_tokens', LA.legacy_scheduler_prefill_lookahead)),
    ('reserve_prefill_lookahead: no reservation', ('fix1',),
     lambda mp: edit(mp, LA, 'reserve_prefill_lookahead', 'if 0 < remaining < lookahead:', 'if False:')),
    ('reserve_prefill_lookahead: reserves one token short', ('fix1',),
     lambda mp: edit(mp, LA, 'reserve_prefill_lookahead', 'num_new -= lookahead - remaining', 'num_new -= lookahead - remaining - 1')),
    ('extra_retained_tokens: none retained', ('fix1',),
     lambda mp: edit(mp, LA, 'extra_retained_tokens', "return max(0, check_int('lookahead', lookahead, 0) - 1)", 'return 0')),
    # fix 2: the backoff, the remote count, the truncation (contract and connector)
    ('prefill_backoff: the Mamba-only legacy', ('fix2',),
     lambda mp: mp.setattr(B, 'prefill_backoff', lambda has_mamba, lookahead, bounded_replay=False: B.legacy_prefill_backoff(has_mamba))),
    ('prefill_backoff: L - 2', ('fix2',), lambda mp: edit(mp, B, 'prefill_backoff', 'return max(1 if has_mamba or bounded_replay else 0, lookahead - 1)', 'return max(1 if has_mamba or bounded_replay else 0, lookahead - 2)')),
    ('prefill_backoff: L', ('fix2',), lambda mp: edit(mp, B, 'prefill_backoff', 'return max(1 if has_mamba or bounded_replay else 0, lookahead - 1)', 'return max(1 if has_mamba or bounded_replay else 0, lookahead)')),
    ('remote_prefill_token_count: one token more than P computed', ('fix2',),
     lambda mp: edit(mp, B, 'remote_prefill_token_count', 'return num_prompt_tokens - backoff if', 'return num_prompt_tokens - backoff + 1 if')),
    ('truncate_request_for_prefill: never truncates', ('fix2',),
     lambda mp: edit(mp, B, 'truncate_request_for_prefill', 'return _drop_tail(request, backoff)', 'return False')),
    ('connector _prefill_backoff: legacy with the fix on', ('fix2',),
     lambda mp: mp.setattr(CM.PDConnectorScheduler, '_prefill_backoff', lambda self: B.legacy_prefill_backoff(self._has_mamba))),
    ('connector truncation: one token more than its backoff', ('fix2',),
     lambda mp: mp.setattr(CM.PDConnectorScheduler, '_truncate_request_for_prefill',
                           lambda self, request: B.truncate_request_for_prefill(request, self._prefill_backoff() + 1))),
    # fix 3: the ordering (connector and contract), the scheduler's assertion
    ('connector on_new_request: truncates after the lookup (0.27.1 order)', ('fix3',),
     lambda mp: (edit(mp, CM.PDConnectorScheduler, 'on_new_request', 'if self.fixes.truncation_ordering and', 'if False and'),
                 edit(mp, CM.PDConnectorScheduler, 'get_num_new_matched_tokens', 'if not self.fixes.truncation_ordering and', 'if'))),
    ('schedule_num_new_tokens: the legacy count', ('fix3',),
     lambda mp: mp.setattr(O, 'schedule_num_new_tokens', O.legacy_schedule_num_new_tokens)),
    ('scheduler: assert num_new_tokens > 0 removed', ('fix3',),
     lambda mp: edit(mp, SM.Scheduler, '_num_new_tokens_waiting', 'if not num_new_tokens > 0:', 'if False:')),
    # fix 4: the slots
    ('num_lookahead_tokens: k for DFlash', ('fix4',), lambda mp: mp.setattr(S, 'num_lookahead_tokens', S.legacy_num_lookahead_tokens)),
    ('num_lookahead_tokens: k + 1 dropped to k by an off-by-one', ('fix4',),
     lambda mp: edit(mp, S, 'num_lookahead_tokens', 'return k + 1', 'return k')),
    ('effective_lookahead_tokens: withheld at every step', ('fix4',),
     lambda mp: mp.setattr(S, 'effective_lookahead_tokens', lambda num_lookahead, load_kv_async: 0)),
    # fix 5: the row rules, the runner's rule and switch, the scheduler's padding
    ('prefill_runs_as_decode_0330: no num_computed > 0 guard', ('fix5',),
     lambda mp: edit(mp, R, 'prefill_runs_as_decode_0330', ' & (c > 0)', '')),
    ('0.33.0 V2 rule: the 0.27.1 rule', ('fix5',), lambda mp: mp.setitem(R.ROW_RULES, '0.33.0 V2', R.ROW_RULES['0.27.1'])),
    ('0.33.0 V2 rule: at most k tokens', ('fix5',), lambda mp: v2_rule(mp, '(s <= num_speculative_tokens + 1)', '(s <= num_speculative_tokens)')),
    ('0.33.0 V2 rule: a zero-draft decode row runs as prefill', ('fix5',), lambda mp: v2_rule(mp, '& (s > 0)', '& (d > 0)')),
    ('runner: the fix-5 switch inverted', ('verdicts',), runner_switch_inverted),
    ('runner: rows classified by the legacy rule whatever the arm', ('fix5',),
     lambda mp: edit(mp, RM.ModelRunner, '_gdn_rows', 'self.gdn_rule, num_scheduled', "'0.27.1', num_scheduled")),
    ('scheduler: no placeholder padding', ('fix2',),
     lambda mp: edit(mp, SM.Scheduler, '_num_new_tokens_waiting', 'pad_spec_decode = (self.scheduler_config.pad_spec_decode and', 'pad_spec_decode = (False and')),
    # fix 6: the guard (the kernel's, the runner's flag, the contract's form)
    ('kernel: the guard compares with > instead of >=', ('fix6',),
     lambda mp: edit(mp, KA, '_assemble_kernel', '(seq_len - num_logits >= prefill_len)', '(seq_len - num_logits > prefill_len)')),
    ('runner: the kernel called with the legacy guard', ('fix6',), V._legacy_guard),
    ('writes_last_sampled: the legacy form', ('fix6',),
     lambda mp: [mp.setattr(mod, 'writes_last_sampled', G.legacy_writes_last_sampled) for mod in (G, KC)]),
    # the lossless check and the verdicts
    ('lossless: a length check', ('verdicts',),
     lambda mp: edit(mp, K, 'lossless', 'lossless=outputs == ref)', 'lossless=[len(o) for o in outputs] == [len(r) for r in ref])')),
    ('lossless: counts no differing request', ('verdicts',),
     lambda mp: edit(mp, K, 'lossless', 'requests_differing=sum(d is not None for d in differing(outputs, ref))', 'requests_differing=0')),
    ('direction_reproduced: yes on equal figures', ('verdicts',),
     lambda mp: mp.setattr(REP, 'direction_reproduced', lambda r: '— (the seed gives no figure)' if r.fix not in REP.SEED_DIRECTION
                           else ('yes' if r.fixed >= r.legacy else 'no: ours runs the other way'))),
    ('decides: the interval ignored', ('verdicts',),
     lambda mp: edit(mp, K, 'decides', "if d['n'] < 2 or lo <= 0 <= hi:", 'if False:')),
    ('paired_diff: legacy − fixed', ('verdicts',), lambda mp: edit(mp, K, 'paired_diff', 'm, h, n = paired(fixed, legacy)', 'm, h, n = paired(legacy, fixed)')),
    ('invariant_verdict: always yes', ('verdicts',), lambda mp: mp.setattr(REP, 'invariant_verdict', lambda r: 'yes')),
]

EQUIVALENT = {  # mutant: why no verdict can tell it from the fixed form
    "runner's row rule given prompt_len for prefill_len":
        "prefill_len exceeds prompt_len only for a request resumed after preemption; every row such a request can be scheduled "
        "(a prefill chunk of more than k + 1 tokens, a shorter chunk or one-token tail with 0 or placeholder drafts) takes the "
        "same GDN path, or one that starts from the same state (num_accepted = 1 after a prefill row), under either length; "
        "test_experiment_verdicts.test_resumed_hybrid_request_keeps_its_outputs passes with it in place",
    "prefill_runs_as_decode_0330: a two-token tail without drafts runs as decode":
        "a decode row of at most k + 1 tokens without drafts starts from the slot's state entry num_accepted - 1 = 0, the state a "
        "prefill row starts from, and runs the same recurrence over the same tokens: the contract's truth table marks such a "
        "tail 'either' (ROW_KINDS, 'D-side 2-token tail (backoff 2)')",
    "scheduler: placeholder padding without the max_model_len cap":
        "the cap keeps a padded step's placeholder positions under max_model_len; this engine's block tables and KV allocation have "
        "no max_model_len bound of their own and the placeholder's KV slot is the request's own: served at max_model_len = N + 1, "
        "N + 2, N + 3 (text-hybrid P/D, MTP k = 1) the outputs equal a run without a drafter with the cap and without it",
}

@pytest.fixture(scope='module')
def one_thread():
    with torch_threads(1): yield

def _killed(group:tuple)->str|None:
    "The first killer of `group` that fails (returns False or raises), or None."
    for g in group:
        try:
            if not KILLERS[g](): return g
        except Exception as e: return f'{g} ({type(e).__name__})'
    return None

def test_killers_pass_on_the_fixed_code(one_thread):
    "Every killer holds on the code as it is: a mutant's kill is its own doing."
    assert {g: f() for g, f in KILLERS.items()} == {g: True for g in KILLERS}

@pytest.mark.parametrize('name,group,put', MUTANTS, ids=[m[0] for m in MUTANTS])
def test_mutant_is_killed(name, group, put, monkeypatch, one_thread):
    put(monkeypatch)
    assert _killed(group), f'survived: {name}'

def test_the_mutants_cover_the_twelve_functions():
    "At least one mutant per function the module docstring names, and the equivalent ones say why."
    names = ' '.join(m[0] for m in MUTANTS)
    for part in ('num_prefill_lookahead_tokens', 'prefill_backoff', 'on_new_request', 'num_lookahead_tokens', 'V2 rule',
                 'prefill_runs_as_decode_0330', 'kernel', 'assert', 'padding', 'runner', 'connector', 'lossless', 'direction_reproduced',
                 'invariant_verdict'):
        assert part in names, part
    assert all(len(why) > 40 for why in EQUIVALENT.values())
