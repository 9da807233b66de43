"""Every public function of the contracts beyond the six (draft groups, state slots, draft accounting, connector lookup)
and of the kernel guard, called with one bad argument at a time: a `ValueError` (a wrong type: `ArgTypeError`, which
is a `TypeError` too) whose message starts with that argument's name; never a silent answer, never another error."""
import pytest
from vllm_pd_spec.config import ArgTypeError
from vllm_pd_spec.contracts import connector_lookup as L, draft_accounting as A, draft_groups as D, guard, state_slots as S

G = [D.CacheGroup('full_attention', 1, 1), D.CacheGroup('mamba')]
STEP = dict(num_computed=0, num_scheduled=4, num_scheduled_spec=0, num_tokens=4, num_hashed_blocks=1)
HIT = dict(fa_hit=4, state_boundaries={4}, max_len=8)
CALLS = [  # (function, a valid call's arguments)
    (D.CacheGroup, dict(kind='full_attention', num_target_layers=1, num_draft_layers=0, is_eagle_group=False, enable_kv_transfer=True)),
    (D.needs_block_drop, dict(method='mtp')), (D.legacy_needs_block_drop, dict(method='dflash')),
    (D.draft_group_ids, dict(groups=G)), (D.drop_group_ids, dict(groups=G, method='mtp')),
    (D.legacy_drop_group_ids, dict(groups=G, method='mtp')), (D.annotated_group_ids_0330, dict(groups=G, method='mtp')),
    (D.coordinator_drop_group_ids_0330, dict(groups=G, method='eagle')),
    (D.consumer_drop_group_ids, dict(groups=G, method='mtp', consumer='offloading', form='0.33.0')),
    (D.transfer_group_ids, dict(groups=G)), (D.decode_draft_kv, dict(groups=G, p_runs_drafter=True, recompute_missing=False)),
    (D.reported_54926_layout, dict(groups=G)),
    (S.mamba_block_ids, dict(num_tokens=8, block_size=4, num_speculative_blocks=2, mode='align', first_id=1)),
    (S.running_state_slot, dict(block_ids=[1, 2, 3], num_speculative_blocks=1)),
    (S.state_slots, dict(block_ids=[1, 2, 3], num_speculative_blocks=1, mode='all')),
    (S.pair_positional, dict(p_slots=[1], d_slots=[2])),
    (S.pair_state_slots, dict(p_blocks=[1, 2], p_spec=1, d_blocks=[3, 4], d_spec=1, mode='none')),
    (S.legacy_pair_state_slots, dict(p_blocks=[1, 2], p_spec=1, d_blocks=[3, 4], d_spec=1, mode='none')),
    (S.received_state, dict(pairs=[(1, 3)], p_blocks=[1, 2], p_spec=1, d_blocks=[3, 4], d_spec=1)),
    (A.connector_num_tokens, dict(num_computed=4, num_scheduled=4, num_scheduled_spec=3)),
    (A.legacy_connector_num_tokens, dict(num_computed=4, num_scheduled=4, num_scheduled_spec=3)),
    (A.storable_blocks, dict(num_tokens=8, block_size=4, num_hashed_blocks=2)),
    (A.legacy_storable_blocks, dict(num_tokens=8, block_size=4, num_hashed_blocks=2)),
    (A.lookup_hit_blocks, dict(num_cached_blocks=3, drop=True)), (A.load_blocks, dict(hit_blocks=3, drop=True)),
    (A.legacy_load_blocks, dict(hit_blocks=3, drop=False)), (A.Step, STEP),
    (A.request_steps, dict(prompt_len=8, block_size=4, k=2, accepted=[1, 2], chunk=4, first_computed=0, pad_first=False)),
    (A.run_store, dict(steps=[A.Step(**STEP)], block_size=4, form='assert')), (A.StoreRun().holes, dict(num_blocks=3)),
    (L.plain_hit, HIT), (L.connector_path_hit, HIT),
    (L.uses_connector_path, dict(connector_attached=True, restores_state=False)),
    (L.legacy_uses_connector_path, dict(connector_attached=True, restores_state=False)),
    (L.resume_boundary, dict(HIT, num_external=0, connector_attached=True, restores_state=False, fixed=True, reconcile_when_empty=True)),
    (L.mamba_checkpoint_position, dict(num_tokens=8, block_size=4, drop=True)),
    (L.next_turn_hit, dict(prompt_len=8, block_size=4, method='mtp', fixed=True)),
    (guard.writes_last_sampled, dict(seq_len=14, num_logits=4, prefill_len=10, num_new_sampled=1)),
    (guard.legacy_writes_last_sampled, dict(seq_len=13, num_logits=4, prefill_len=10, num_new_sampled=1)),
]

def bad_values(name, good)->list:
    "Values of the wrong type or out of range for an argument whose valid value is `good`."
    if isinstance(good, bool): return [None, 'no', 0, 1, 'True']
    if isinstance(good, int): return [-1, True, 1.5, '3', None]
    if name == 'method': return ['medusa', 5, ['mtp'], '']
    if isinstance(good, str): return ['bogus', None, 3, '']
    if name == 'groups': return [None, 'x', [1], [D.CacheGroup('mamba'), None]]
    if name == 'state_boundaries': return [None, 'x', {0}, {-4}, {True}, {1.5}]
    if name == 'pairs': return [None, [(1,)], [(9, 3)], 'x']
    if name in ('steps',): return [None, [1], 'x']
    if name == 'accepted': return [None, [3], [-1], [True], 'x']
    return [None, 'x', [-1], [True], [1.5]]  # block id lists

@pytest.mark.parametrize('fn,kw', CALLS, ids=[getattr(f, '__qualname__', str(f)) for f, _ in CALLS])
def test_one_bad_argument_raises_naming_it(fn, kw):
    fn(**kw)  # the valid call works
    for name, good in kw.items():
        for bad in bad_values(name, good):
            with pytest.raises(ValueError, match=f'^{name}=') as e: fn(**{**kw, name: bad})
            assert '\n' not in str(e.value) and len(str(e.value)) < 400
            if not isinstance(bad, (int, type(good))) or isinstance(bad, bool) != isinstance(good, bool):
                assert isinstance(e.value, (ArgTypeError, ValueError))

def test_wrong_types_are_type_errors():
    for call in (lambda: D.CacheGroup('mamba', num_target_layers='1'), lambda: S.running_state_slot(None, 0),
                 lambda: A.run_store('x', 4), lambda: L.plain_hit(1, None, 4), lambda: guard.writes_last_sampled(1.0, 1, 1),
                 lambda: L.uses_connector_path('yes', False)):
        with pytest.raises(TypeError): call()

def test_relations_between_arguments():
    with pytest.raises(ValueError, match='^num_target_layers='): D.CacheGroup('full_attention', 0, 0)
    with pytest.raises(ValueError, match='^num_scheduled_spec='): A.connector_num_tokens(0, 1, 2)
    with pytest.raises(ValueError, match='^first_computed='): A.request_steps(4, 4, 1, [], first_computed=4)
    with pytest.raises(ValueError, match='^fa_hit='): L.plain_hit(9, set(), 8)
    with pytest.raises(ValueError, match='^num_logits='): guard.writes_last_sampled(3, 4, 1)
    with pytest.raises(ValueError, match='^first_id='): S.mamba_block_ids(4, 4, 0, first_id=0)  # 0 is the null block
