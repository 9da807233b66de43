"""Fix 6 contract as properties of the rows the scheduler makes. Each row is built from its role (a prefill chunk, the
final prefill chunk, a decode step, D's padded prompt tail) and the tokens it feeds; whether the last sampled token
belongs at the row's first logit position follows from that timeline, not from the contract's formula."""
import pytest
from hypothesis import find, given, strategies as st
from vllm_pd_spec.contracts.guard import writes_last_sampled, legacy_writes_last_sampled

KINDS = ('prefill', 'final_prefill', 'decode', 'tail')

@st.composite
def rows(draw, kinds=KINDS):
    "`(kind, (seq_len, num_logits, prefill_len, num_new_sampled), done)`: a row as scheduled, `done` tokens computed before."
    kind, P, ns = draw(st.sampled_from(kinds)), draw(st.integers(1, 64)), draw(st.sampled_from([0, 1]))
    if kind in ('prefill', 'final_prefill'):  # prompt tokens only; the final chunk samples at the prompt's last position
        done = draw(st.integers(0, P - 1))
        q = P - done if kind == 'final_prefill' else draw(st.integers(1, P - done))
        if kind == 'prefill' and done + q == P: kind = 'final_prefill'
        return kind, (done + q, 1, P, ns), done
    d = draw(st.integers(0 if ns and kind == 'decode' else 1, 7))  # drafts (D's first step: k >= 1 placeholders)
    if kind == 'decode':  # the last sampled token (if it feeds back), then the drafts
        done = draw(st.integers(P, P + 64))
        return kind, (done + ns + d, ns + d, P, ns), done
    done = draw(st.integers(0, P - 1))  # D's first step: the prompt tail P did not send, then k placeholder drafts
    return kind, (P + d, ns + d, P, ns), done

def belongs(kind, args)->bool:
    "From the timeline: the first logit position holds the token sampled last step (a decode row that feeds one back)."
    return kind == 'decode' and args[3] == 1

def fed(args, done, write:bool)->list:
    "What the row feeds at positions `done .. seq_len-1`, after the kernel's write of the last sampled token (if any)."
    seq_len, num_logits, P, _ = args
    out = ['prompt' if p < P else 'output' for p in range(done, seq_len)]
    if write: out[seq_len - num_logits - done] = 'last sampled'
    return out

@given(rows())
def test_fixed_writes_exactly_where_the_sampled_token_belongs(r):
    kind, args, done = r
    assert writes_last_sampled(*args) == belongs(kind, args)

@given(rows())
def test_legacy_differs_only_on_prompt_tail_rows(r):
    kind, args, done = r
    assert legacy_writes_last_sampled(*args) == (belongs(kind, args) or (kind == 'tail' and args[3] == 1))

@given(rows())
def test_fixed_never_changes_a_prompt_token(r):
    "The effect: every position below the prompt's end still feeds its prompt token after the fixed kernel's write."
    kind, args, done = r
    before, after = fed(args, done, False), fed(args, done, writes_last_sampled(*args))
    assert all(a == 'prompt' for a, b in zip(after, before) if b == 'prompt')

def test_legacy_changes_a_prompt_token():
    kind, args, done = find(rows(), lambda r: 'prompt' in fed(r[1], r[2], False) and
                            fed(r[1], r[2], legacy_writes_last_sampled(*r[1])).count('prompt') < fed(r[1], r[2], False).count('prompt'))
    assert kind == 'tail' and args[3] == 1

def test_examples():
    assert writes_last_sampled(14, 4, 10) and legacy_writes_last_sampled(14, 4, 10)  # decode row, 3 drafts
    assert not writes_last_sampled(13, 4, 10) and legacy_writes_last_sampled(13, 4, 10)  # D prompt tail: the bug
    assert not writes_last_sampled(8, 1, 10)  # prefill chunk

counts = st.one_of(st.integers(-3, 70), st.booleans(), st.none(), st.floats(0, 10), st.text(max_size=2))

@given(counts, counts, counts, counts)
def test_bad_rows_raise_naming_the_argument(seq_len, num_logits, prefill_len, ns):
    "A row no batch can hold (a negative count, more logits than tokens, `num_new_sampled` not 0 or 1, a non-integer)."
    args = (seq_len, num_logits, prefill_len, ns)
    is_int = lambda x: isinstance(x, int) and not isinstance(x, bool)
    ok = all(map(is_int, args)) and 0 <= num_logits <= seq_len and prefill_len >= 0 and ns in (0, 1)
    for fn in (writes_last_sampled, legacy_writes_last_sampled):
        if ok: assert fn(*args) in (True, False)
        else:
            with pytest.raises(ValueError, match=r'^(seq_len|num_logits|prefill_len|num_new_sampled)='): fn(*args)
