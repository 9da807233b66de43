"The configuration: predicates as upstream defines them, validation naming the field, the fix switches."
import pytest
from hypothesis import given, strategies as st
from vllm_pd_spec.config import *
from vllm_pd_spec.registry import fix_switches

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

SWITCHES = fix_switches()  # {number: switch}, the registry's

@given(st.sets(st.sampled_from(FIX_NAMES + tuple(SWITCHES))))
def test_fix_switches(off):
    f = Fixes().off(*off)
    names = {SWITCHES[x] if isinstance(x, int) else x for x in off}
    for i, n in SWITCHES.items(): assert f.is_on(n) == f.is_on(i) == (n not in names)
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

# --- validation: the helpers every module uses, and the config's own fields
@pytest.mark.parametrize('name', FIX_NAMES)
@pytest.mark.parametrize('bad', [None, 0, 1, 'no', 'off', [], 0.0])
def test_fixes_take_only_bools(name, bad):
    with pytest.raises(TypeError, match=f'^{name}='): Fixes(**{name: bad})

@pytest.mark.parametrize('mk,field', [(lambda: SchedulerConfig(enable_chunked_prefill='no'), 'enable_chunked_prefill'),
                                      (lambda: SchedulerConfig(pad_spec_decode=None), 'pad_spec_decode'),
                                      (lambda: CacheConfig(enable_prefix_caching=1), 'enable_prefix_caching'),
                                      (lambda: make_kv_transfer_params(do_remote_prefill='no'), 'do_remote_prefill'),
                                      (lambda: SpeculativeConfig('mtp', '3'), 'num_speculative_tokens'),
                                      (lambda: SpeculativeConfig(['mtp'], 3), 'method'),
                                      (lambda: ModelConfig(LayerSpec('gdn')), 'layers'),
                                      (lambda: ModelConfig((LayerSpec('gdn'),), block_size=16.0), 'block_size'),
                                      (lambda: VllmConfig(fixes=None), 'fixes'),
                                      (lambda: VllmConfig(speculative_config='mtp'), 'speculative_config'),
                                      (lambda: cdiv(10, 0), 'b'), (lambda: cdiv(-1, 4), 'a'), (lambda: cdiv(3.5, 4), 'a')])
def test_bad_types_and_values_name_the_field(mk, field):
    "Every bad value raises a ValueError (a wrong type: `ArgTypeError`, a TypeError too) whose message starts with the field."
    with pytest.raises(ValueError, match=f'^{field}=') as e: mk()
    assert '\n' not in str(e.value) and len(str(e.value)) < 300

def test_has_mamba_style_flags_refuse_truthy_strings():
    with pytest.raises(TypeError, match="^has_mamba='no' is invalid"): check_bool('has_mamba', 'no')
    assert check_bool('has_mamba', True) is True and check_bool('has_mamba', False) is False

values = st.one_of(st.integers(), st.booleans(), st.none(), st.floats(allow_nan=True), st.text(max_size=5),
                   st.lists(st.integers(), max_size=2))

@given(values, st.one_of(st.none(), st.integers(-5, 5)), st.one_of(st.none(), st.integers(-5, 5)))
def test_check_int_accepts_exactly_the_integers_in_range(v, lo, hi):
    ok = isinstance(v, int) and not isinstance(v, bool) and (lo is None or v >= lo) and (hi is None or v <= hi)
    try: assert check_int('n', v, lo, hi) == v and ok
    except ArgTypeError as e: assert not isinstance(v, int) or isinstance(v, bool); assert str(e).startswith('n=')
    except ValueError as e: assert not ok and isinstance(v, int) and str(e).startswith('n=')

@given(values)
def test_check_bool_and_choice(v):
    try: assert check_bool('flag', v) is v and isinstance(v, bool)
    except TypeError as e: assert not isinstance(v, bool) and isinstance(e, ValueError)
    try: assert check_choice('role', v, ROLES) in ROLES
    except ValueError as e: assert v not in ROLES and str(e).startswith('role=')

def test_long_values_are_cut_in_messages():
    with pytest.raises(ValueError) as e: check_int('n', list(range(10_000)), 0)
    assert len(str(e.value)) < 200
