"The benchmark records vLLM's file by its path inside the package, never the machine's directories."
from vllm_pd_spec.kernels.bench import in_vllm

def test_in_vllm_drops_the_machine_directories():
    assert in_vllm('/opt/x/.vllm033/vllm/v1/worker/gpu/input_batch.py') == 'vllm/v1/worker/gpu/input_batch.py'
    assert in_vllm('/usr/lib/site-packages/vllm/vllm/v1/worker/gpu/input_batch.py') == 'vllm/v1/worker/gpu/input_batch.py'
    assert in_vllm('/srv/input_batch.py') == 'input_batch.py'
