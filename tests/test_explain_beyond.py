"`vllm-pd-spec explain` reports the derivations beyond the six (rows 7-11)."
from vllm_pd_spec.explain import explain, format_explain

def _hazard_keys(r): return {h['key'] for h in r['hazards'] if not h['harmless']}

def test_hybrid_mtp_pd():
    r = explain(method='mtp', k=3, mtp_modules=3, mamba=True, prefix_hit=64)
    assert {'drop_group_ids.offloading', 'draft_kv_on_d', 'state_slot_received.p_k1', 'load_blocks.store_hit',
            'connector_path.no_state_restore'} <= _hazard_keys(r)
    assert r['fixed']['state_slot_received.same_width'] == r['legacy']['state_slot_received.same_width'] == 'P state'
    assert 'Mamba state slots in the exchange' in format_explain(r) and '.ipynb' not in format_explain(r)

def test_dflash_drop_and_padded_store_count():
    r = explain(method='dflash', k=3, mamba=True, prompt_len=20, role='standalone')
    assert {'last_block_drop', 'next_turn_hit'} <= _hazard_keys(r) and r['fixed']['next_turn_hit'] == 16 and r['legacy']['next_turn_hit'] == 0
    r = explain(method='eagle', k=3, prompt_len=47, role='decode')
    assert (r['fixed']['storable_blocks.d_first_step'], r['legacy']['storable_blocks.d_first_step']) == (2, 3)
    r = explain(method='eagle', k=3, prompt_len=40, role='decode')   # 39 + 1 + 3 stays within the hashed blocks
    assert r['legacy']['storable_blocks.d_first_step'] == r['fixed']['storable_blocks.d_first_step'] == 2
    assert 'connector_num_tokens.d_first_step' in _hazard_keys(r) and 'storable_blocks.d_first_step' not in _hazard_keys(r)

def test_no_drafter_no_new_rows():
    r = explain(method='ngram', k=3, mamba=True)
    assert not {k for k in _hazard_keys(r) if k.split('.')[0] in ('drop_group_ids', 'draft_kv_on_d')}

def test_waiting_queue_rows_on_the_decode_side():
    r = explain(method='mtp', k=3, mtp_modules=3)
    assert {'waiting_queue.holders_first', 'waiting_queue.load_margin_blocks'} <= _hazard_keys(r)
    assert (r['fixed']['waiting_queue.load_margin_blocks'], r['legacy']['waiting_queue.load_margin_blocks']) == (1, 0)
    assert 'A load that holds blocks is never stranded' in format_explain(r)
    p = explain(method='mtp', k=3, role='prefill')
    assert p['fixed']['waiting_queue.holders_first'] is None and explain()['fixed']['waiting_queue.holders_first'] is None
