"Fix 6 contract: `writes_last_sampled` (fixed) vs `legacy_writes_last_sampled`, as properties over all small rows."
import pytest
from hypothesis import given, strategies as st
from vllm_pd_spec.contracts.guard import writes_last_sampled, legacy_writes_last_sampled

rows = st.tuples(st.integers(0, 64), st.integers(0, 9), st.integers(0, 64), st.sampled_from([0, 1])).filter(lambda r: r[1] <= r[0])

@given(rows)
def test_fixed_never_targets_a_prompt_position(r):
    seq_len, num_logits, prefill_len, ns = r
    if writes_last_sampled(seq_len, num_logits, prefill_len, ns): assert seq_len - num_logits >= prefill_len

@given(rows)
def test_fixed_is_legacy_minus_prompt_tail_rows(r):
    seq_len, num_logits, prefill_len, ns = r
    tail = seq_len - num_logits < prefill_len < seq_len
    assert writes_last_sampled(*r) == (legacy_writes_last_sampled(*r) and not tail)

@given(rows)
def test_prefill_rows_and_zero_sampled_never_write(r):
    seq_len, num_logits, prefill_len, ns = r
    if seq_len <= prefill_len or ns == 0:
        assert not writes_last_sampled(*r) and not legacy_writes_last_sampled(*r)

def test_examples():
    assert writes_last_sampled(14, 4, 10) and legacy_writes_last_sampled(14, 4, 10)  # decode row, 3 drafts
    assert not writes_last_sampled(13, 4, 10) and legacy_writes_last_sampled(13, 4, 10)  # D prompt tail: the bug
    assert not writes_last_sampled(8, 1, 10)  # prefill chunk

def test_bad_rows_name_the_argument():
    with pytest.raises(ValueError, match='num_logits'): writes_last_sampled(0, 1, 0)
    with pytest.raises(ValueError, match='num_new_sampled'): legacy_writes_last_sampled(4, 1, 3, 2)
    with pytest.raises(ValueError, match='seq_len'): writes_last_sampled(-1, 0, 0)
