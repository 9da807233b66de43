"Shared pytest set-up: GPU-marked tests skip without CUDA; hypothesis profiles."
import os, pytest
from hypothesis import settings, HealthCheck

# CI runs every property test with at least 1,000 examples; `HYPOTHESIS_PROFILE=dev` for quick local runs.
settings.register_profile('ci', max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile('dev', max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get('HYPOTHESIS_PROFILE', 'ci'))

def _cuda():
    try:
        import torch
        return torch.cuda.is_available()
    except Exception: return False

def pytest_collection_modifyitems(config, items):
    if _cuda(): return
    skip = pytest.mark.skip(reason='needs CUDA: run `make gpu-test` on a GPU machine')
    for it in items:
        if 'gpu' in it.keywords: it.add_marker(skip)
