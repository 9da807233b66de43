"Shared pytest set-up: GPU-marked tests skip without CUDA; hypothesis profiles; the `reproduce` command over results already made."
import copy, importlib, json, os, pytest
from hypothesis import settings, HealthCheck

# `make test` runs every property test it collects with the 'ci' profile's 300 examples (the state machine included: it
# asserts it got them), about 30 s less of `make test` on 2 cores than 1,000; `make test-deep` runs the same tests
# with the 'deep' profile's 1,000. Tests that search for a legacy counterexample (`find`) carry their own budget beside
# them, as do the tests that `make test` skips: those marked gpu (`make gpu-test`) and the Triton-interpreter
# comparisons with vLLM's own kernels (`make test-vllm`, KERNEL_TEST_EXAMPLES). `HYPOTHESIS_PROFILE=dev` for quick local runs.
settings.register_profile('deep', max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile('ci', max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile('dev', max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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

@pytest.fixture
def reproduce_over(monkeypatch, tmp_path):
    "`reproduce_over(results, modules)`: the JSON `reproduce --fix ... --quick` writes, each fix's `run` (in `modules`) returning `results[fix]`."
    def go(results:dict, modules:dict)->list:
        from vllm_pd_spec.cli import main
        for f, m in modules.items(): monkeypatch.setattr(importlib.import_module(m), 'run', lambda f=f, **kw: copy.deepcopy(results[f]))
        out = tmp_path/'r.json'
        assert main(['reproduce', '--fix', *map(str, modules), '--quick', '--json', str(out)]) == 0
        return json.loads(out.read_text())
    return go
