"""The lookahead-hash contract against a real vLLM (`make test-vllm`): vLLM's own functions, case by case.

The fixed form is the newest release's code, the legacy form 0.33.0's: on a release that resolves `L` per connector
(`VllmConfig._resolve_num_hash_lookahead_tokens`) every case equals the fixed form; on one with the property only,
the legacy form; a release with neither has no lookahead hashes (its rows are `not present`). Skips without vLLM."""
import inspect
import pytest

pytestmark = pytest.mark.vllm

def _vllm():
    import importlib.util
    if importlib.util.find_spec('vllm') is None: pytest.skip('vLLM is not installed here: run `make test-vllm`')
    import vllm, vllm.v1.request  # noqa: F401
    return vllm

@pytest.fixture(scope='module')
def P():
    _vllm()
    from vllm_pd_spec.audit import probes_hashes
    return probes_hashes

@pytest.fixture(scope='module')
def form(P):
    "'fixed' or 'legacy': the form this release's code is (by which code it has), or a skip where it has no lookahead hashes."
    from vllm.config import VllmConfig
    if P.hash_lookahead_code() is None: pytest.skip('no lookahead block hashes in this release')
    return 'fixed' if hasattr(VllmConfig, '_resolve_num_hash_lookahead_tokens') else 'legacy'

def _form(H, name, form): return getattr(H, name if form == 'fixed' else f'legacy_{name}')

def test_hash_lookahead_equals_the_contract_on_every_case(P, form):
    from vllm_pd_spec.audit.probes_beyond import deployment
    from vllm_pd_spec.contracts import lookahead_hashes as H
    fn = P.hash_lookahead_code()[0]
    names, left = P.registered_connectors()
    import vllm.distributed.kv_transfer.kv_connector.factory as F
    own = inspect.getsource(F)   # the release's own registrations (test helpers loaded in this process may add more)
    assert 'NixlConnector' in names and 'MoRIIOConnector' in names
    assert all('not importable' in why for n, why in left.items() if f'"{n}"' in own), left   # the contract knows every one of them
    cases = P.hash_cases(names)
    bad = [P.show_case(c) for c in cases if fn(deployment(*c)) != P.our(_form(H, 'hash_lookahead_tokens', form), c)]
    assert not bad and len(cases) > 1000, bad[:5]

def test_scheduler_drop_equals_the_contract_on_every_case(P, form):
    from vllm_pd_spec.audit.probes_beyond import scheduler_protection
    from vllm_pd_spec.contracts import lookahead_hashes as H
    cases = P.scheduler_cases(P.registered_connectors()[0])
    for c in cases:
        L, drop = scheduler_protection(*c)
        assert (L, drop) == P.our(lambda *a: H.protection(*a, fixed=form == 'fixed'), c), P.show_case(c)

def test_truncate_block_hashes_keeps_what_the_contract_keeps(P, form):
    from vllm.v1.request import Request
    from vllm_pd_spec.contracts import lookahead_hashes as H
    if not hasattr(Request, 'truncate_block_hashes'): pytest.skip('no truncate_block_hashes in this release')
    for c in P.truncation_cases(): assert P.kept_after_truncation(c) == H.kept_block_hashes(c[0] - c[1], c[2], c[3]), c

def test_prefix_hit_is_the_hit_model(P, form):
    from vllm_pd_spec.contracts import lookahead_hashes as H
    for c in P.hit_cases(): assert P.vllm_hit_blocks(c) == H.hit_blocks(*c), c

def test_p_side_truncation_leaves_no_stale_hash(P, form):
    from vllm_pd_spec.audit.probes_connectors import connector_classes
    for cls in connector_classes()[0].values():
        for c in P.truncation_run_cases(): assert P.p_truncation(cls, c)[2] == 0, (cls.__name__, c)

def test_checkpoint_and_drop_sets_take_the_connectors_lookahead(form):
    "Contracts 7 and 10 at vLLM's `L`: every case agrees; the checkpoint without `L` misreads NIXL exactly where NIXL hashes ahead."
    from vllm_pd_spec.audit.probes_beyond import probe_checkpoint, probe_draft_group_consumers
    import re
    (ck,) = probe_checkpoint()
    assert ck.verdict == 'fixed' and ck.cases == 3 * 88, ck.note
    nixl = int(re.search(r'(\d+) of 88 behind NixlConnector', ck.note).group(1))
    assert (nixl > 0) == (form == 'fixed') and ' 0 of 88 behind MoRIIOConnector' in ck.note
    rows = {f.contract: f for f in probe_draft_group_consumers()}
    assert rows['7. draft groups: offloading SchedulerOffloadConfig.from_spec'].verdict == 'fixed'
    for c in ('7. draft groups: KVCacheCoordinator', '7. draft groups: MooncakeStoreCoordinator'):
        assert 'equals on every case: coordinator_drop_group_ids_0330' in rows[c].note, rows[c].note
