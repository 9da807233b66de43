"Fix 1: one `num_prefill_lookahead_tokens` for the scheduler, the KV-cache planner and coordinator, the connector and the runner."
import pytest
from hypothesis import given, find, strategies as st
from vllm_pd_spec.config import SpeculativeConfig, METHODS
from vllm_pd_spec.contracts.lookahead import *

specs = st.one_of(st.none(), st.builds(SpeculativeConfig, st.sampled_from(METHODS), st.integers(1, 16), st.integers(1, 8)))

@pytest.mark.parametrize('remaining,expected', [(0, 10), (1, 7), (2, 7), (3, 7)])
def test_upstream_reserve_table(remaining, expected):
    "Upstream's `test_reserve_multi_module_mtp_prefill_lookahead`: lookahead 3, 10 tokens."
    assert reserve_prefill_lookahead(10, 0, 10 - remaining, 3) == expected

@given(specs)
def test_lookahead_rule(spec):
    L = num_prefill_lookahead_tokens(spec)
    if spec is None or not spec.use_eagle(): assert L == 0
    elif spec.method == 'mtp' and min(spec.num_mtp_modules, spec.num_speculative_tokens) > 1: assert L == spec.num_speculative_tokens
    else: assert L == 1

@given(st.data(), st.integers(1, 4096), st.integers(0, 16))
def test_reserve_never_ends_a_chunk_inside_the_window(data, num_tokens, lookahead):
    num_computed = data.draw(st.integers(0, num_tokens - 1))
    num_new = data.draw(st.integers(1, num_tokens - num_computed))
    new = reserve_prefill_lookahead(num_tokens, num_computed, num_new, lookahead)
    assert 0 <= new <= num_new
    rem = num_tokens - num_computed - new
    assert new == 0 or rem == 0 or rem >= lookahead            # the invariant
    if num_tokens - num_computed - num_new == 0 or num_tokens - num_computed - num_new >= lookahead:
        assert new == num_new                                  # only shrinks when it must
    else: assert new == max(0, num_new - (lookahead - (num_tokens - num_computed - num_new)))  # and by the least amount

@given(st.integers(0, 10_000), st.integers(1, 100), st.integers(0, 16))
def test_reserve_leaves_decode_steps_alone(extra, num_new, lookahead):
    assert reserve_prefill_lookahead(100, 100 + extra, num_new, lookahead) == num_new

def test_closed_forms_take_any_length():
    "No range is built: a 10**11-token prompt costs what a 10-token one does."
    assert reserve_prefill_lookahead(10**11, 10**11 - 5, 4, 3) == 2
    assert num_cacheable_tokens(10**11, 4) == 10**11 - 3

@pytest.mark.parametrize('call,name,exc', [
    (lambda: num_prefill_lookahead_tokens('mtp'), 'spec', TypeError),
    (lambda: reserve_prefill_lookahead(10, 0, -1, 3), 'num_new', ValueError),
    (lambda: reserve_prefill_lookahead(10, 0, 2, 3.0), 'lookahead', TypeError),
    (lambda: reserve_prefill_lookahead(10, True, 2, 3), 'num_computed', TypeError),
    (lambda: extra_retained_tokens(-1), 'lookahead', ValueError),
    (lambda: num_reprefillable_tokens('2'), 'lookahead', TypeError),
    (lambda: num_cacheable_tokens(-3, 2), 'num_computed_tokens', ValueError),
    (lambda: runner_prefill_lookahead(None), 'lookahead', TypeError),
    (lambda: legacy_runner_prefill_lookahead(3), 'spec', TypeError),
    (lambda: legacy_connector_backoff(1), 'has_mamba', TypeError)])
def test_bad_arguments_are_named(call, name, exc):
    with pytest.raises(exc, match=name): call()

@given(specs, st.booleans())
def test_every_consumer_reads_the_one_number(spec, has_mamba):
    L = num_prefill_lookahead_tokens(spec)
    fixed = {c: f for c, (f, _) in consumer_lookaheads(spec, has_mamba).items()}
    assert fixed == dict(scheduler=L, kv_cache_planner=max(0, L - 1), kv_cache_coordinator=max(0, L - 1),
                         connector=max(int(has_mamba), L - 1), runner=max(1, L))

@given(specs, st.booleans())
def test_legacy_is_vllm_0_27_1(spec, has_mamba):
    "0.27.1: scheduler `1 if use_eagle else 0` (no reservation), no SW retention, every block published, Mamba-only backoff, runner k or 1."
    legacy = {c: l for c, (_, l) in consumer_lookaheads(spec, has_mamba).items()}
    eagle = spec is not None and spec.use_eagle()
    runner = spec.num_speculative_tokens if spec is not None and spec.use_multi_module_mtp() else 1
    assert legacy == dict(scheduler=int(eagle), kv_cache_planner=0, kv_cache_coordinator=0, connector=int(has_mamba), runner=runner)

@given(specs)
def test_runner_rows_agree_on_every_configuration(spec):
    "A refactor with no behaviour change: 0.27.1's runner already had `max(1, L)` rows."
    assert legacy_runner_prefill_lookahead(spec) == runner_prefill_lookahead(num_prefill_lookahead_tokens(spec))

@given(specs, st.integers(0, 64), st.integers(1, 64), st.integers(1, 64))
def test_legacy_scheduler_reserves_nothing(spec, num_computed, num_new, extra):
    "A reservation of 0.27.1's number never shrinks a chunk."
    n = num_computed + num_new + extra
    assert reserve_prefill_lookahead(n, num_computed, num_new, legacy_scheduler_prefill_lookahead(spec)) == num_new

def test_legacy_consumers_drift():
    "A counterexample: some configuration where a 0.27.1 consumer's number is not the contract's."
    spec, mamba = find(st.tuples(specs, st.booleans()), lambda t: disagreeing_consumers(*t) != ())
    assert spec.use_multi_module_mtp()

def test_legacy_drift_is_exactly_multi_module_mtp():
    for m in METHODS:
        for k in range(1, 6):
            for mods in range(1, 5):
                s = SpeculativeConfig(m, k, mods)
                for mamba in (False, True):
                    d = disagreeing_consumers(s, mamba)
                    assert bool(d) == s.use_multi_module_mtp() and 'runner' not in d
                    if d: assert {'scheduler', 'kv_cache_planner', 'kv_cache_coordinator'} <= set(d)

@given(specs, st.booleans())
def test_v0290_is_vllm_0_29_0(spec, has_mamba):
    "The intermediate form (read in 0.29.0, no #55055): scheduler `k if use_multi_module_mtp() else 1` for the eagle family, planner `k - 1` for multi-module MTP, coordinator one less than the scheduler, 0.27.1's connector and runner."
    n = {c: v['intermediate'] for c, v in form_lookaheads(spec, has_mamba).items()}
    assert n == intermediate_lookaheads(spec, has_mamba)
    eagle, mmm = spec is not None and spec.use_eagle(), spec is not None and spec.use_multi_module_mtp()
    sched = (spec.num_speculative_tokens if mmm else 1) if eagle else 0
    assert n == dict(scheduler=sched, kv_cache_planner=spec.num_speculative_tokens - 1 if mmm else 0,
                     kv_cache_coordinator=max(0, sched - 1), connector=int(has_mamba), runner=spec.num_speculative_tokens if mmm else 1)

@given(specs, st.booleans())
def test_55055_fix1_part_is_neutral_against_0_29_0(spec, has_mamba):
    "From the intermediate form (0.29.0) to the fixed one only the connector (fix 2's backoff) changes; the fix-1 consumers changed from legacy (0.27.1) to intermediate."
    ch = changed_in(spec, has_mamba)
    assert all('fixed' not in ch[c] for c in ('scheduler', 'kv_cache_planner', 'kv_cache_coordinator', 'runner'))
    assert ch['runner'] == () and all(f == 'intermediate' for c in ('scheduler', 'kv_cache_planner', 'kv_cache_coordinator') for f in ch[c])

def test_the_connector_changes_in_the_fixed_form_only_for_multi_module_mtp():
    "A counterexample exists, and only multi-module MTP has one."
    spec, mamba = find(st.tuples(specs, st.booleans()), lambda t: changed_in(*t)['connector'] == ('fixed',))
    assert spec.use_multi_module_mtp()

@pytest.mark.parametrize('call,name,exc', [
    (lambda: scheduler_prefill_lookahead_0290('mtp'), 'spec', TypeError),
    (lambda: extra_retained_tokens_0290(3), 'spec', TypeError),
    (lambda: num_reprefillable_tokens_0290(3), 'spec', TypeError),
    (lambda: runner_prefill_lookahead_0290(3), 'spec', TypeError),
    (lambda: connector_backoff_0290(1), 'has_mamba', TypeError)])
def test_v0290_bad_arguments_are_named(call, name, exc):
    with pytest.raises(exc, match=name): call()
