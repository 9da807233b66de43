"""`vllm_pd_spec.plugin` on a real vLLM it knows (`make test-vllm`: the newest audited release): the patched scheduler halves.

Requests, configs and schedulers come from vLLM's own test helpers (`tests/v1/kv_connector/unit/utils.py` of the
installed release's source release, which `make test-vllm` extracts to `.cache/vllm-tests/<version>/kv_connector_utils.py`);
the model is the two-layer Llama `config.json` shipped in this package (no weights, no tokenizer, no hub).
Skips unless the installed vLLM is one the plugin has fingerprints for and those helpers are present."""
import importlib.resources, importlib.util, os
from pathlib import Path
import pytest

pytestmark = pytest.mark.vllm
K = 3  # multi-module MTP: k = 3 drafts from 3 modules, num_prefill_lookahead_tokens = 3

def _vllm():
    "The installed vLLM; a skip only where none is installed: an installed vLLM that fails to import fails the test."
    if importlib.util.find_spec('vllm') is None: pytest.skip('vLLM is not installed here: run `make test-vllm`')
    import vllm, vllm.v1.request  # noqa: F401
    from vllm_pd_spec import plugin
    known = sorted({v for p in plugin.PATCHES for v in p.fingerprints})
    if vllm.__version__ not in known: pytest.skip(f'the plugin knows vLLM {", ".join(known)}, this is {vllm.__version__}')
    return vllm

@pytest.fixture(scope='module')
def U():
    "vLLM's own KV-connector test helpers, loaded from the extracted source release."
    v = _vllm().__version__
    path = Path(os.environ.get('VLLM_KV_TEST_UTILS', Path(__file__).parents[1] / '.cache' / 'vllm-tests' / v / 'kv_connector_utils.py'))
    if not path.exists(): pytest.skip(f'{path} is missing: `make test-vllm` extracts it from the vLLM {v} source release')
    spec = importlib.util.spec_from_file_location('vllm_kv_connector_test_utils', path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod

@pytest.fixture(scope='module')
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp('model')
    (d / 'config.json').write_text((importlib.resources.files('vllm_pd_spec') / 'data' / 'audit_model_config.json').read_text())
    os.environ['HF_HUB_OFFLINE'] = '1'
    return str(d)

@pytest.fixture
def plugin():
    from vllm_pd_spec import plugin
    yield plugin
    plugin.remove()

def kv_cache_config(mamba:bool, block_size:int=16):
    "One attention group, plus a GDN-like Mamba group (two states, as MoRI-IO requires) for hybrid models."
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, MambaSpec
    groups = [KVCacheGroupSpec(['model.layers.0.self_attn.attn'],
                               FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=8, dtype=torch.float16))]
    if mamba: groups.append(KVCacheGroupSpec(['model.layers.1.linear_attn'], MambaSpec(
        block_size=block_size, shapes=((6, 3), (1, 2, 2)), dtypes=(torch.float16, torch.float16), mamba_cache_mode='align')))
    from vllm_pd_spec.audit.harness import kv_cache_config as release_kv_cache_config
    return release_kv_cache_config(groups, 64, block_size)  # with every argument the release takes (0.34.0: hash_block_size)

MORIIO_EXTRA = lambda read: {'read_mode': read, 'host_ip': '127.0.0.1', 'handshake_port': 6001, 'notify_port': 6002}

def config(U, model, connector:str, role:str, mtp:bool, mamba:bool=False, read:bool|None=None, block_size:int=16):
    "vLLM's `VllmConfig` from its test helper; multi-module MTP through vLLM's `SpeculativeConfig` (built without a draft checkpoint)."
    from vllm_pd_spec.audit.harness import vllm_spec
    vc = U.create_vllm_config(model=model, kv_connector=connector, kv_role=role, dtype='float32', max_model_len=256,
                              block_size=block_size, kv_connector_extra_config=None if read is None else MORIIO_EXTRA(read))
    vc.scheduler_config.disable_hybrid_kv_cache_manager = False
    vc.model_config.skip_tokenizer_init = True
    if mamba: vc.cache_config.mamba_cache_mode = 'align'
    if mtp: vc.speculative_config = vllm_spec(('mtp', K, K))
    return vc

def halves(U, model, connector:str, mtp:bool, mamba:bool, read=None):
    "(P-side, D-side) connector schedulers built by their own constructors."
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector import MooncakeConnectorScheduler
    from vllm.distributed.kv_transfer.kv_connector.v1.moriio.moriio_connector import MoRIIOConnectorScheduler
    cls = dict(MooncakeConnector=MooncakeConnectorScheduler, MoRIIOConnector=MoRIIOConnectorScheduler)[connector]
    return tuple(cls(config(U, model, connector, role, mtp, mamba, read), role, kv_cache_config(mamba))
                 for role in ('kv_producer', 'kv_consumer'))

def drops_and_recomputes(U, p, d, n:int)->tuple:
    "(prompt tokens P drops in on_new_request, prompt tokens D recomputes after get_num_new_matched_tokens)."
    r = U.create_request(num_tokens=n, do_remote_decode=True)
    p.on_new_request(r)
    loaded, _ = d.get_num_new_matched_tokens(U.create_request(num_tokens=n, do_remote_prefill=True), 0)
    return n - r.num_prompt_tokens, n - loaded

CONFIGS = [(False, False), (True, False), (False, True), (True, True)]  # (Mamba, MTP): neither, Mamba, MTP, both
CONNECTORS = [('MooncakeConnector', None), ('MoRIIOConnector', False), ('MoRIIOConnector', True)]  # MoRI-IO WRITE, READ
PROMPTS = (1, 2, 3, 4, 17, 33)

def test_fingerprints_match_and_register_is_off_by_default(plugin, monkeypatch):
    _vllm()
    assert sorted(c.__name__ for c in plugin.check().values()) == ['MoRIIOConnectorScheduler', 'MooncakeConnectorScheduler']
    monkeypatch.delenv(plugin.ENV, raising=False)
    plugin.register()
    assert not plugin._applied
    monkeypatch.setenv(plugin.ENV, '1')
    plugin.register()
    assert len(plugin._applied) == 9

@pytest.mark.parametrize('connector,read', CONNECTORS)
@pytest.mark.parametrize('mamba,mtp', CONFIGS)
def test_p_drop_equals_d_recompute(U, model, plugin, connector, read, mamba, mtp):
    "With the plugin, P drops `prefill_backoff` tokens and D recomputes exactly those (READ: at least one)."
    from vllm.distributed.kv_transfer.kv_connector.v1.moriio.moriio_common import MoRIIOError
    from vllm_pd_spec.contracts.backoff import prefill_backoff
    plugin.apply()
    try: p, d = halves(U, model, connector, mtp, mamba, read)
    except MoRIIOError as e:  # MoRI-IO itself accepts only DSpark with a hybrid model (0.33.0; 0.34.0 in WRITE mode)
        assert connector == 'MoRIIOConnector' and mamba and mtp and 'DSpark' in str(e), e
        return
    b = prefill_backoff(mamba, K if mtp else 0)
    for n in PROMPTS:
        drop, recompute = drops_and_recomputes(U, p, d, n)
        assert drop == (b if n > b else 0), (n, drop)
        assert recompute == (max(1, drop) if read else drop), (n, drop, recompute)

@pytest.mark.parametrize('connector,read', CONNECTORS)
def test_without_the_plugin_mtp_is_not_backed_off(U, model, connector, read):
    "The legacy behaviour the audit reports: with multi-module MTP and no Mamba, P ships the whole prompt."
    p, d = halves(U, model, connector, mtp=True, mamba=False, read=read)
    assert drops_and_recomputes(U, p, d, 33) == (0, 1 if read else 0)

def test_moriio_read_tail_allows_the_recomputed_tokens(U, model, plugin):
    "READ aligns D's blocks with P's; D's tail beyond them holds the backoff plus the lookahead."
    from vllm.distributed.kv_transfer.kv_connector.v1.moriio.moriio_connector import MoRIIOConnectorScheduler as M
    make = lambda: M(config(U, model, 'MoRIIOConnector', 'kv_consumer', True, read=True, block_size=4), 'd', kv_cache_config(False, 4))
    before = make()._max_decode_tail_blocks
    plugin.apply()
    after = make()
    assert (before, after._max_decode_tail_blocks) == (1, 2)  # ceil((1 + 3) / 4) -> ceil((2 + 3) / 4)
    # prompt 9, backoff 2: P ships 7 tokens (2 blocks); D holds 7 loaded + 2 recomputed + 3 lookahead = 12 tokens (3 blocks)
    local, remote = [10, 11, 12], [20, 21]
    assert after._align_read_blocks(local, remote, after._max_decode_tail_blocks) == ([10, 11], [20, 21])
    with pytest.raises(ValueError, match='tail'): M._align_read_blocks(local + [13, 14], remote, before)

@pytest.mark.parametrize('mamba,mtp', CONFIGS)
def test_real_scheduler_truncates_before_the_prefix_lookup(U, model, plugin, mamba, mtp):
    "vLLM's Scheduler with MooncakeConnector on P: add_request truncates; a prefix hit on the whole prompt does not trip the assert."
    from vllm.v1.request import RequestStatus
    from vllm_pd_spec.contracts.backoff import prefill_backoff
    plugin.apply()
    b, n = prefill_backoff(mamba, K if mtp else 0), 33
    s = U.create_scheduler(config(U, model, 'MooncakeConnector', 'kv_producer', mtp, mamba), num_blocks=64,
                           kv_cache_config=kv_cache_config(mamba))
    earlier = U.create_request(request_id=999, num_tokens=n, common_prefix_len=n)
    earlier.kv_transfer_params = None
    s.add_request(earlier); s.schedule(); s.finish_requests(earlier.request_id, RequestStatus.FINISHED_ABORTED)
    r = U.create_request(request_id=1, num_tokens=n, common_prefix_len=n, do_remote_decode=True)
    s.add_request(r)
    assert r.num_prompt_tokens == n - b
    out = s.schedule()  # would raise AssertionError (num_new_tokens > 0) if the truncation came after the lookup
    assert 0 < out.num_scheduled_tokens[r.request_id] <= n - b
    if not mamba:  # Mamba's aligned prefill splits chunks at block boundaries
        fresh = U.create_scheduler(config(U, model, 'MooncakeConnector', 'kv_producer', mtp, mamba), num_blocks=64,
                                   kv_cache_config=kv_cache_config(mamba))
        r2 = U.create_request(request_id=2, num_tokens=20, do_remote_decode=True)
        fresh.add_request(r2)
        assert fresh.schedule().num_scheduled_tokens[r2.request_id] == 20 - b

@pytest.mark.parametrize('mamba', (False, True))
def test_truncation_drops_the_hashes_it_invalidates(U, model, plugin, mamba):
    "With the plugin, Mooncake's P side under lookahead hashes (MTP k = 3 hashes 3 ahead where the release resolves it) keeps `kept_block_hashes`."
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector import MooncakeConnectorScheduler
    from vllm.v1.request import Request
    from vllm_pd_spec.audit.harness import resolve_hash_lookahead, vllm_request
    from vllm_pd_spec.audit.probes_hashes import block_hasher
    from vllm_pd_spec.config import SpeculativeConfig
    from vllm_pd_spec.contracts.backoff import prefill_backoff
    from vllm_pd_spec.contracts.lookahead_hashes import kept_block_hashes, hash_lookahead_tokens
    if not hasattr(Request, 'truncate_block_hashes'): pytest.skip('this release keeps no lookahead hashes behind a connector')
    plugin.apply()
    B, b = 4, prefill_backoff(mamba, K)
    vc = resolve_hash_lookahead(config(U, model, 'MooncakeConnector', 'kv_producer', True, mamba, block_size=B))
    L = vc.num_hash_lookahead_tokens
    assert L == hash_lookahead_tokens(SpeculativeConfig('mtp', K, K), 'MooncakeConnector') == K
    p = MooncakeConnectorScheduler(vc, 'kv_producer', kv_cache_config(mamba, B))
    for n in (9, 10, 11, 12, 13, 17, 33):
        r = vllm_request(n, block_hasher=block_hasher(B, L))
        p.on_new_request(r)
        assert n - r.num_prompt_tokens == b, n
        assert len(r.block_hashes) == kept_block_hashes(n - b, B, L), (n, len(r.block_hashes))
        assert r.block_hashes == vllm_request(n - b, block_hasher=block_hasher(B, L)).block_hashes   # each a hash of what P holds
