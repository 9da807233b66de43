"An exception inside a step kills the engine, as upstream's engine core dies: every unfinished request is lost."
import pytest
from vllm_pd_spec.config import Fixes, LayerSpec, ModelConfig, VllmConfig, SchedulerConfig, CacheConfig, make_kv_transfer_params
from vllm_pd_spec.engine.request import Request
from vllm_pd_spec.engine.scheduler import SchedulerAssertionError
from vllm_pd_spec.engine.toy_runner import ToyRunner
from vllm_pd_spec.engine.llm_engine import LLMEngine, EngineDeadError

def p_engine(fixes):
    vc = VllmConfig(None, ModelConfig((LayerSpec('full_attention'), LayerSpec('gdn')), 16), 'prefill', fixes,
                    SchedulerConfig(max_num_batched_tokens=8192), CacheConfig(num_gpu_blocks=64))
    return LLMEngine(vc, runner=lambda s, w: ToyRunner(s, ack_sends=True))

def req(rid, prompt): return Request(rid, prompt, max_tokens=1, kv_transfer_params=make_kv_transfer_params(do_remote_decode=True))

@pytest.mark.parametrize('fixes,dies', [(Fixes().off('truncation_ordering'), True), (Fixes(), False)])
def test_second_identical_prompt_kills_only_the_legacy_engine(fixes, dies):
    eng = p_engine(fixes)
    eng.add_request(req('A', list(range(1, 18))))
    while eng.has_work(): eng.step()
    eng.add_request(req('B', list(range(1, 18)))); eng.add_request(req('C', list(range(50, 90))))
    if not dies:
        while eng.has_work(): eng.step()
        assert {'B', 'C'} <= set(eng.finished) and eng.dead is None
        return
    with pytest.raises(EngineDeadError) as e: eng.step()
    assert isinstance(e.value.__cause__, SchedulerAssertionError) and sorted(e.value.lost) == ['B', 'C'] == sorted(eng.lost)
    with pytest.raises(EngineDeadError): eng.step()
    with pytest.raises(EngineDeadError): eng.add_request(req('D', [1, 2, 3]))
