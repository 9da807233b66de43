"The engine's waiting scan: a request holding blocks for a landed load is reached past a preempted request that cannot allocate (fixed), and stranded behind it (legacy)."
import pytest
from vllm_pd_spec.config import VllmConfig, ModelConfig, LayerSpec, SpeculativeConfig, SchedulerConfig, CacheConfig
from vllm_pd_spec.engine.request import Request, RequestStatus
from vllm_pd_spec.engine.scheduler import Scheduler

def _queue(holding_first:bool, margin:bool=True)->Scheduler:
    "D with 12 blocks of 4 tokens: `L` holds 2 for a load that landed; in front of it `H` (preempted, holds nothing) needs 17 for its chunk, 9 are free."
    cfg = VllmConfig(SpeculativeConfig('mtp', 3), ModelConfig((LayerSpec('full_attention'),), block_size=4), 'decode',
                     cache_config=CacheConfig(num_gpu_blocks=12),
                     scheduler_config=SchedulerConfig(kv_holding_first=holding_first, reserve_spec_step_blocks=margin))
    s = Scheduler(cfg)
    s.add_request(Request('L', list(range(1, 9)), max_tokens=4))
    L = s.waiting.popleft()
    assert s.kv_cache_manager.allocate_slots(L, 0, 8, delay_cache_blocks=True) is not None
    L.num_computed_tokens, L.status = 8, RequestStatus.WAITING_FOR_REMOTE_KVS
    s.finished_recving_kv_req_ids.add('L'); s.waiting.append(L)
    s.add_request(Request('H', list(range(1, 81)), max_tokens=4))
    H = s.waiting.pop(); H.status, H.num_preemptions = RequestStatus.PREEMPTED, 1
    s.waiting.appendleft(H)
    return s

def test_fixed_reaches_the_landed_load():
    s = _queue(True)
    out = s.schedule()
    assert list(out.num_scheduled_tokens) == ['L'] and [r.request_id for r in s.running] == ['L']

def test_legacy_strands_it_for_good():
    s = _queue(False)
    for _ in range(5): assert s.schedule().num_scheduled_tokens == {}
    assert not s.running and [r.request_id for r in s.waiting] == ['H', 'L'] and s._holds_kv_blocks(s.requests['L'])

def test_the_margin_switch_sets_the_reservation():
    s = _queue(True)
    assert s._spec_decode_step_blocks() == 2 and s._load_reservation() == 2 * (1 + 1)  # 1 + 3 + 3 tokens, 4-token blocks; L in flight
    assert _queue(True, margin=False)._load_reservation() == 0
