"A load that holds blocks is never stranded: the fixed scan and admission keep every holder reachable; the legacy forms strand one."
import pytest
from hypothesis import given, find, strategies as st
from vllm_pd_spec.config import ArgTypeError
from vllm_pd_spec.contracts.waiting_queue import *

# requests that hold nothing: new, or preempted (blocks freed), each needing some blocks
fresh = st.lists(st.integers(1, 64), max_size=5).map(lambda ns: [Waiting(f'n{i}', need=n) for i, n in enumerate(ns)])
bursts = st.tuples(st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(0, 60), st.integers(0, 3))  # load sizes, free, margin

def _mix(holders, others, cut):
    "Non-holders in front of the holders (a preempted request goes to the head), the rest after them."
    return others[:cut] + holders + others[cut:]

@given(bursts, fresh, st.integers(0, 5))
def test_fixed_never_strands_a_holder(b, others, cut):
    blocks, free, margin = b
    holders, left = admit_loads(blocks, free, margin)
    assert stranded(_mix(holders, others, cut), left) == []

@given(bursts)
def test_fixed_admission_leaves_every_landed_load_its_step(b):
    blocks, free, margin = b
    holders, left = admit_loads(blocks, free, margin)
    assert schedule_waiting(holders, left)['admitted'] == [w.name for w in holders]

def test_legacy_scan_strands_a_holder_behind_a_preempted_request():
    "Found by search over generated queues, not written in."
    def bad(x):
        (blocks, free, margin), others, cut = x
        holders, left = admit_loads(blocks, free, margin)
        return bool(stranded(_mix(holders, others, cut), left, fixed=False))
    (blocks, free, margin), others, cut = find(st.tuples(bursts, fresh, st.integers(0, 5)), bad)
    holders, left = admit_loads(blocks, free, margin)
    q = _mix(holders, others, cut)
    assert stranded(q, left, fixed=False) and not stranded(q, left)

def test_each_rule_alone_strands():
    "Holders-first without the margin strands behind a holder (#57104); the margin without holders-first, behind a preempted request."
    def alone(scan_fixed, admit_fixed):
        def bad(x):
            (blocks, free, margin), others, cut = x
            holders, left = admit_loads(blocks, free, margin, fixed=admit_fixed)
            return bool(stranded(_mix(holders, others, cut), left, fixed=scan_fixed))
        return find(st.tuples(bursts, fresh, st.integers(0, 5)), bad)
    assert alone(True, False) and alone(False, True)

def test_a_pending_load_behind_the_stop_is_stranded_too():
    q = [Waiting('H', need=9), Waiting('L', holds=2, need=1, load='pending')]
    assert stranded(q, 3, fixed=False) == ['L'] and stranded(q, 3) == []

@pytest.mark.parametrize('kw,field', [(dict(holds=-1), 'holds'), (dict(need='2'), 'need'), (dict(load='landed'), 'load')])
def test_bad_waiting_names_the_field(kw, field):
    with pytest.raises((ValueError, TypeError), match=field): Waiting('x', **kw)

def test_bad_arguments_name_the_field():
    with pytest.raises(ArgTypeError, match='queue'): schedule_waiting([('a', 1)], 3)
    with pytest.raises(ValueError, match='queue'): scan_order([Waiting('a'), Waiting('a')])
    with pytest.raises(ValueError, match='num_free_blocks'): schedule_waiting([], -1)
    with pytest.raises(ValueError, match='margin'): async_load_admissible(1, 2, 0, -1)
    with pytest.raises(ValueError, match='block_size'): spec_decode_step_blocks(1, 1, 0)
