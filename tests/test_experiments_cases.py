"The single-request engine cases of fixes 3, 4 and 1 (small sweeps; the notebooks run the full ones)."
import pytest
from vllm_pd_spec.config import Fixes, SpeculativeConfig
from vllm_pd_spec.experiments.lookahead import window_case
from vllm_pd_spec.experiments.ordering import fix3_case, pair_rows, stream_run, prefix_stream
from vllm_pd_spec.experiments.slots import fix4_case, fix4_stale_row_case

def test_fix3_engine_matches_ordering_contract():
    rows = pair_rows(lengths=range(2, 34), block_sizes=(4, 16))
    assert all(r['agree'] == r['of'] for r in rows)
    assert sum(r['fixed_deaths'] for r in rows) == 0 and sum(r['legacy_deaths'] for r in rows if r['spec'] == 'none') > 0
    assert all(r['legacy_deaths'] == 0 for r in rows if r['spec'] != 'none')  # the MTP last-block drop keeps the hit short

def test_fix3_issue_53514_case():
    legacy = fix3_case(17, 16, fixes=Fixes().off('truncation_ordering'))
    assert legacy['died'] and legacy['hit'] == 16 and legacy['lost'] == 1
    fixed = fix3_case(17, 16)
    assert not fixed['died'] and fixed['num_new_tokens'] == 16  # the hit is capped at 16 - 1: no full block

def test_fix3_stream_loses_more_than_the_tripping_request():
    ps = prefix_stream(60, seed=0)
    legacy, fixed = stream_run(ps, 4, fixes=Fixes().off('truncation_ordering')), stream_run(ps, 4)
    assert legacy['lost'] > legacy['deaths'] > 0 and legacy['lost'] + legacy['finished'] == 60
    assert fixed == dict(requests=60, deaths=0, lost=0, finished=60)

@pytest.mark.parametrize('k', [1, 2, 3])
def test_fix4_dflash_writes_inside_allocation_only_when_fixed(k):
    legacy = [fix4_case(k, n, fixes=Fixes().off('dflash_slots')) for n in range(1, 33)]
    fixed = [fix4_case(k, n) for n in range(1, 33)]
    assert sum(c['prefill'] for c in legacy) > 0 and sum(c['decode'] for c in legacy) > 0
    assert sum(c['prefill'] + c['decode'] for c in fixed) == 0
    assert all((c['prefill'] > 0) == bool(c['predicted_prefill']) for c in legacy + fixed)

def test_fix4_eagle_needs_no_extra_slot():
    assert all(fix4_case(3, n, method='eagle')['prefill'] + fix4_case(3, n, method='eagle')['decode'] == 0 for n in range(1, 20))

def test_fix1_drafter_reads_freed_block_with_0_27_1_planner():
    assert window_case(3, 19, fixes=Fixes().off('lookahead_contract'))['drafter'] > 0
    assert window_case(3, 19) == dict(target=0, drafter=0)

def test_fix4_stray_writes_land_in_a_cached_prefix():
    legacy = [fix4_stale_row_case(3, 64, n, fixes=Fixes().off('dflash_slots')) for n in range(1, 33)]
    fixed = [fix4_stale_row_case(3, 64, n) for n in range(1, 33)]
    assert sum(c['cached_prefix'] for c in legacy) > 0
    assert sum(c['cached_prefix'] + c['live_request'] + c['free_or_null'] for c in fixed) == 0
