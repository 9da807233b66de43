"The configuration: predicates as upstream defines them, validation naming the field, the fix switches."
import pytest
from hypothesis import given, strategies as st
from vllm_pd_spec.config import *

ks, mods = st.integers(1, 64), st.integers(1, 16)

@given(st.sampled_from(METHODS), ks, mods)
def test_predicates_follow_upstream(method, k, m):
    s = SpeculativeConfig(method, k, m)
    assert s.use_eagle() == (method in ('eagle', 'eagle3', 'mtp', 'dflash', 'dspark'))
    assert s.use_dflash() == (method == 'dflash') and s.uses_draft_model() == (method == 'draft_model')
    assert s.use_multi_module_mtp() == (method == 'mtp' and k > 1 and m > 1)

@pytest.mark.parametrize('kw,field', [(dict(method='foo', num_speculative_tokens=1), 'method'),
                                      (dict(method='mtp', num_speculative_tokens=0), 'num_speculative_tokens'),
                                      (dict(method='eagle', num_speculative_tokens=-2), 'num_speculative_tokens'),
                                      (dict(method='mtp', num_speculative_tokens=2, num_mtp_modules=0), 'num_mtp_modules')])
def test_spec_validation_names_field(kw, field):
    with pytest.raises(ValueError, match=f'^{field}='): SpeculativeConfig(**kw)

def test_unknown_method_lists_allowed():
    with pytest.raises(ValueError) as e: SpeculativeConfig('foo', 1)
    assert all(m in str(e.value) for m in METHODS)

@pytest.mark.parametrize('mk', [lambda: LayerSpec('sliding_window'), lambda: LayerSpec('sliding_window', 0),
                                lambda: LayerSpec('full_attention', 4)])
def test_window_validation(mk):
    with pytest.raises(ValueError, match='^sliding_window='): mk()

def test_layer_kind_and_role_validation():
    with pytest.raises(ValueError, match='^kind='): LayerSpec('lstm')
    with pytest.raises(ValueError, match='^role='): VllmConfig(role='router')
    with pytest.raises(ValueError, match='^role='): kv_role('router')
    with pytest.raises(ValueError, match='^block_size='): ModelConfig((LayerSpec('gdn'),), block_size=0)

@given(st.lists(st.one_of(st.just(LayerSpec('full_attention')), st.just(LayerSpec('gdn')),
                          st.integers(1, 4096).map(lambda w: LayerSpec('sliding_window', w))), min_size=1))
def test_model_traits(layers):
    m = ModelConfig(layers)
    assert m.has_mamba == any(l.kind == 'gdn' for l in layers)
    ws = [l.sliding_window for l in layers if l.kind == 'sliding_window']
    assert m.sliding_window == (min(ws) if ws else None)

def test_roles_and_params():
    assert [kv_role(r) for r in ROLES] == [None, 'kv_producer', 'kv_consumer']
    p = make_kv_transfer_params(do_remote_decode=True, remote_port=5)
    assert type(p) is dict and p['do_remote_decode'] and not p['do_remote_prefill'] and p['remote_port'] == 5
    assert VllmConfig(role='decode').kv_role == 'kv_consumer'

@given(st.sets(st.sampled_from(FIX_NAMES + tuple(range(1, 7)))))
def test_fix_switches(off):
    f = Fixes().off(*off)
    names = {FIX_NAMES[x-1] if isinstance(x, int) else x for x in off}
    for i, n in enumerate(FIX_NAMES, 1): assert f.is_on(n) == f.is_on(i) == (n not in names)
    assert f.on(*off) == Fixes()
    assert Fixes.all_off().on(*FIX_NAMES).off(*names) == f

@pytest.mark.parametrize('bad', ['guard', 0, 7, True])
def test_unknown_fix(bad):
    with pytest.raises(ValueError) as e: Fixes().off(bad)
    assert 'kernel_guard' in str(e.value)

def test_defaults():
    c = VllmConfig()
    assert c.speculative_config is None and c.fixes == Fixes() and c.role == 'standalone'
    assert c.model.layers == (LayerSpec('full_attention'),) and c.model.block_size == 16

@pytest.mark.parametrize('mk,field', [(lambda: SchedulerConfig(max_num_batched_tokens=0), 'max_num_batched_tokens'),
                                      (lambda: SchedulerConfig(max_num_seqs=1.5), 'max_num_seqs'),
                                      (lambda: SchedulerConfig(long_prefill_token_threshold=-1), 'long_prefill_token_threshold'),
                                      (lambda: CacheConfig(num_gpu_blocks=1), 'num_gpu_blocks'),
                                      (lambda: VllmConfig(scheduler_config=dict(max_num_seqs=4)), 'scheduler_config')])
def test_scheduler_and_cache_limits_validated(mk, field):
    with pytest.raises(ValueError, match=f'^{field}='): mk()

@given(st.integers(0, 10_000), st.integers(1, 64))
def test_cdiv(a, b):
    assert cdiv(a, b) * b >= a > (cdiv(a, b) - 1) * b or a == 0 == cdiv(a, b)
