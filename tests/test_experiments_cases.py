"The single-request engine cases of fixes 3 and 1, and the stray-write follower of fix 4 (small sweeps; the notebooks run the full ones)."
import pytest
from vllm_pd_spec.config import Fixes, SpeculativeConfig
from vllm_pd_spec.experiments.lookahead import window_case
from vllm_pd_spec.experiments.ordering import fix3_case, pair_rows, stream_run, prefix_stream

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

def test_fix1_drafter_reads_freed_block_with_0_27_1_planner():
    assert window_case(3, 19, fixes=Fixes().off('lookahead_contract'))['drafter'] > 0
    assert window_case(3, 19) == dict(target=0, drafter=0)

def test_fix4_single_request_strays_land_in_the_null_block():
    "A fresh engine, one DFlash request: legacy writes past its allocation go to block 0 and touch nobody."
    import torch
    from vllm_pd_spec.experiments.slots import stream_case, shared_prefix_prompts
    from vllm_pd_spec.model.drafters import load_model
    m, p = load_model('text-attn', torch.float64), shared_prefix_prompts(1, seed=3, min_len=30, max_len=30)
    legacy, fixed = stream_case(3, p, Fixes().off('dflash_slots'), m, max_tokens=6), stream_case(3, p, Fixes(), m, max_tokens=6)
    assert legacy['writes_outside'] == legacy['landed']['null'] > 0 and not legacy['victims']
    assert fixed['writes_outside'] == 0 and legacy['outputs'] == fixed['outputs'] and legacy['drafts'] == fixed['drafts']

def test_fix4_prompts_are_checked():
    from vllm_pd_spec.experiments.slots import shared_prefix_prompts
    with pytest.raises(ValueError, match='n=0 is invalid: must be an integer >= 1'): shared_prefix_prompts(0)
    with pytest.raises(ValueError, match=r'min_len=50 is invalid: must be in \[1, max_len=10\]'): shared_prefix_prompts(2, min_len=50, max_len=10)
