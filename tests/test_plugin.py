"""`vllm_pd_spec.plugin` without vLLM: off by default, refuses unknown code, patches and restores a fake connector.

A fake `vllm` (just `vllm.config.VllmConfig` with or without `num_prefill_lookahead_tokens`) and fake connector
modules are placed in `sys.modules`; the replacement methods run on plain objects. The real connectors of
vLLM 0.33.0 are tested in `tests/test_plugin_vllm.py` (`make test-vllm`)."""
import enum, sys, types
from types import SimpleNamespace as NS
import pytest
from vllm_pd_spec import plugin
from vllm_pd_spec.contracts.backoff import prefill_backoff

class Request:
    def __init__(self, n, skip=False, **params):
        self.prompt_token_ids, self._all_token_ids = list(range(n)), list(range(n))
        self.prompt_embeds, self.num_prompt_tokens, self.max_tokens = None, n, 16
        self.kv_transfer_params, self._skip = dict(params), skip
    def get_skip_reading_prefix_cache(self): return self._skip

class Mode(enum.Enum):
    READ = 'read'
    WRITE = 'write'

class ToyConnectorScheduler:
    "Mamba's one token, as the connectors of vLLM 0.33.0 hold back."
    def __init__(self, lookahead=0, has_mamba=False, producer=True, mode=Mode.WRITE, block_size=4, num_lookahead_tokens=0):
        self.vllm_config = NS(num_prefill_lookahead_tokens=lookahead, num_lookahead_tokens=num_lookahead_tokens)
        self._has_mamba, self.is_producer, self.mode, self.block_size = has_mamba, producer, mode, block_size
        self._max_decode_tail_blocks = -(-(1 + num_lookahead_tokens) // block_size)
    def on_new_request(self, request): pass
    def get_num_new_matched_tokens(self, request, num_computed_tokens): return 0, False

@pytest.fixture
def fake(monkeypatch):
    "A fake vLLM (with the #55055 property) and a module `toyconn` holding a fresh connector class; returns the class."
    vllm = types.ModuleType('vllm'); vllm.__version__ = 'toy'
    cfg = types.ModuleType('vllm.config')
    cfg.VllmConfig = type('VllmConfig', (), {'num_prefill_lookahead_tokens': property(lambda s: 0)})
    mod = types.ModuleType('toyconn'); mod.MoRIIOMode = Mode
    cls = type('ToyConnectorScheduler', (ToyConnectorScheduler,), {'__module__': 'toyconn'})
    mod.ToyConnectorScheduler = cls
    for name, m in (('vllm', vllm), ('vllm.config', cfg), ('toyconn', mod)): monkeypatch.setitem(sys.modules, name, m)
    yield cls
    plugin.remove()

def patch_for(cls, **methods):
    p = plugin.ConnectorPatch('toyconn:ToyConnectorScheduler', methods, ('on_new_request',), {})
    p.fingerprints['toy'] = plugin.fingerprint(cls, p.reads)
    return p

def test_off_by_default(monkeypatch):
    monkeypatch.delenv(plugin.ENV, raising=False)
    plugin.register()  # no vLLM needed, nothing happens
    assert not plugin._applied and not plugin.enabled()
    assert plugin.enabled({plugin.ENV: '1'}) and not plugin.enabled({plugin.ENV: 'no'})

def test_refuses_unknown_code_and_patches_nothing(fake):
    p = patch_for(fake, _prefill_backoff=plugin._prefill_backoff)
    p.fingerprints['toy'] = '0' * 16
    with pytest.raises(plugin.PluginRefused, match='not the code this plugin was written for'): plugin.apply((p,))
    assert not hasattr(fake, '_prefill_backoff') and not plugin._applied

def test_refuses_a_vllm_without_the_lookahead_property(fake, monkeypatch):
    cfg = types.ModuleType('vllm.config'); cfg.VllmConfig = type('VllmConfig', (), {})
    monkeypatch.setitem(sys.modules, 'vllm.config', cfg)
    with pytest.raises(plugin.PluginRefused, match='predates #55055'): plugin.apply((patch_for(fake),))

def test_register_applies_when_enabled_and_remove_restores(fake, monkeypatch):
    p = patch_for(fake, _prefill_backoff=plugin._prefill_backoff, on_new_request=plugin._on_new_request)
    monkeypatch.setattr(plugin, 'PATCHES', (p,))
    monkeypatch.setenv(plugin.ENV, '1')
    original = fake.on_new_request
    plugin.register(); plugin.register()  # twice: a no-op the second time
    assert fake.on_new_request is plugin._on_new_request and fake(3)._prefill_backoff() == 2
    plugin.remove()
    assert fake.on_new_request is original and not hasattr(fake, '_prefill_backoff')

def test_unimportable_connector_is_skipped_with_a_warning(fake, caplog):
    "Nothing to patch is not success: the warning names what the plugin looked for."
    p = plugin.ConnectorPatch('surely_not_a_module_xyz:C', {}, ('x',), {})
    with caplog.at_level('INFO', logger=plugin.log.name): assert plugin.apply((p,)) == []
    assert [r.levelname for r in caplog.records] == ['WARNING'] and 'nothing to patch' in caplog.text
    assert 'surely_not_a_module_xyz:C' in caplog.text

def test_a_wrapped_hook_keeps_the_connectors_own_duties(fake):
    "on_new_request is wrapped, not replaced: the connector's own hook still runs, its one-token truncation does not."
    seen = []
    def own(self, request):
        seen.append(request.num_prompt_tokens); self._truncate_mamba_request_for_prefill(request)
    fake.on_new_request = own
    fake._truncate_mamba_request_for_prefill = lambda self, request: seen.append('own truncation')
    p = patch_for(fake, _prefill_backoff=plugin._prefill_backoff, _truncate_request_for_prefill=plugin._truncate_request_for_prefill,
                  on_new_request=plugin._wrapping(plugin._on_new_request))
    with plugin.applied((p,)):
        r = Request(9, do_remote_decode=True); fake(4).on_new_request(r)
    assert r.num_prompt_tokens == 6 and seen == [6]

@pytest.mark.parametrize('has_mamba,lookahead', [(False, 0), (True, 0), (False, 3), (True, 3), (True, 2), (False, 1)])
def test_p_drops_what_d_recomputes(fake, has_mamba, lookahead):
    "The patched P side drops `prefill_backoff` tokens and the patched D side (WRITE) loads the rest."
    p = patch_for(fake, _prefill_backoff=plugin._prefill_backoff, _truncate_request_for_prefill=plugin._truncate_request_for_prefill,
                  on_new_request=plugin._moriio_on_new_request, get_num_new_matched_tokens=plugin._moriio_get_num_new_matched_tokens)
    with plugin.applied((p,)):
        b = prefill_backoff(has_mamba, lookahead)
        for n in (1, 2, 3, 9):
            r = Request(n, do_remote_decode=True)
            fake(lookahead, has_mamba).on_new_request(r)
            loaded, is_async = fake(lookahead, has_mamba, producer=False).get_num_new_matched_tokens(Request(n, do_remote_prefill=True), 0)
            assert n - r.num_prompt_tokens == n - loaded == (b if n > b else 0) and is_async == (loaded > 0)
            assert r.max_tokens == (1 if n > b and b else 16)

def test_guards(fake):
    p = patch_for(fake, _prefill_backoff=plugin._prefill_backoff, _truncate_request_for_prefill=plugin._truncate_request_for_prefill,
                  on_new_request=plugin._moriio_on_new_request, get_num_new_matched_tokens=plugin._moriio_get_num_new_matched_tokens)
    with plugin.applied((p,)):
        s = fake(4)
        r = Request(9, skip=True, do_remote_decode=True); s.on_new_request(r)
        assert r.num_prompt_tokens == 9  # prompt logprobs: D recomputes everything, P keeps the prompt
        r = Request(9, do_remote_decode=True); s.on_new_request(r); s.on_new_request(r)
        assert r.num_prompt_tokens == 6 and r.kv_transfer_params['_p_side_truncated']  # once, not twice
        r = Request(9, do_remote_decode=True); fake(4, producer=False).on_new_request(r)
        assert r.num_prompt_tokens == 9  # MoRI-IO's hook truncates on a producer only
        read = fake(4, producer=False, mode=Mode.READ)
        assert read.get_num_new_matched_tokens(Request(9, do_remote_prefill=True), 0) == (6, False)
        assert fake(0, producer=False, mode=Mode.READ).get_num_new_matched_tokens(Request(9, do_remote_prefill=True), 0) == (8, False)
        assert s.get_num_new_matched_tokens(Request(9, do_remote_prefill=True), 0) == (0, False)  # the producer loads nothing

def test_moriio_read_tail_grows_with_the_backoff(fake):
    p = patch_for(fake, _prefill_backoff=plugin._prefill_backoff, __init__=plugin._moriio_init)
    with plugin.applied((p,)):
        assert fake(4, mode=Mode.READ, num_lookahead_tokens=3)._max_decode_tail_blocks == 2   # ceil((3 + 3) / 4)
        assert fake(2, mode=Mode.READ, num_lookahead_tokens=3)._max_decode_tail_blocks == 1   # backoff 1: unchanged
        assert fake(4, mode=Mode.WRITE, num_lookahead_tokens=3)._max_decode_tail_blocks == 1  # WRITE never aligns
