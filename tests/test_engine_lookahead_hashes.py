"The engine keeps block hashes as vLLM 0.34.0 does: eager lookahead hashes, the deployment's L and drop, P-side truncation."
import pytest
from hypothesis import given, strategies as st, settings
from vllm_pd_spec.config import SpeculativeConfig, VllmConfig, ModelConfig, LayerSpec, CacheConfig, KVTransferConfig, make_kv_transfer_params
from vllm_pd_spec.contracts import lookahead_hashes as H
from vllm_pd_spec.contracts.backoff import prefill_backoff
from vllm_pd_spec.contracts.lookahead import num_prefill_lookahead_tokens
from vllm_pd_spec.audit.harness import spec_grid
from vllm_pd_spec.audit.probes_hashes import hash_cases, hit_cases, SCHEDULER_CONNECTORS
from vllm_pd_spec.engine.request import Request, get_request_block_hasher, hash_block_tokens
from vllm_pd_spec.engine.kv_cache_manager import KVCacheManager, get_kv_cache_config
from vllm_pd_spec.engine.scheduler import Scheduler

toks = st.lists(st.integers(0, 50), min_size=0, max_size=40)

@settings(max_examples=60, deadline=None)
@given(prompt=toks.filter(bool), outs=toks, bs=st.integers(1, 6), L=st.integers(0, 4))
def test_hasher_emits_a_hash_once_its_lookahead_exists(prompt, outs, bs, L):
    r = Request('r', prompt, block_hasher=get_request_block_hasher(bs, L))
    assert len(r.block_hashes) == max(0, r.num_tokens - L) // bs
    for t in outs:
        r.append_output_token_ids(t)
        assert len(r.block_hashes) == max(0, r.num_tokens - L) // bs
    fresh = Request('f', r.all_token_ids, block_hasher=get_request_block_hasher(bs, L))
    assert r.block_hashes == fresh.block_hashes   # appended hashes equal a fresh request's

@settings(max_examples=60, deadline=None)
@given(prompt=st.lists(st.integers(0, 50), min_size=8, max_size=40), bs=st.integers(1, 6), L=st.integers(0, 4), data=st.data())
def test_hash_covers_the_block_and_L_tokens_after_it(prompt, bs, L, data):
    p = data.draw(st.integers(0, len(prompt) - 1))
    other = list(prompt); other[p] += 1
    a, b = (Request(n, t, block_hasher=get_request_block_hasher(bs, L)) for n, t in (('a', prompt), ('b', other)))
    for j, (x, y) in enumerate(zip(a.block_hashes, b.block_hashes)):
        assert (x != y) == (p < (j + 1) * bs + L)

def test_legacy_hash_unchanged():
    "L = 0 gives the hashes every saved figure was made with."
    r = Request('r', list(range(8)), block_size=4)
    assert r.block_hashes == [h := hash_block_tokens(None, [0, 1, 2, 3]), hash_block_tokens(h, [4, 5, 6, 7])]

def p_scheduler(spec, release='0.34.0', connector=None, layers=('full_attention',), bs=4, truncate=True):
    vc = VllmConfig(spec, ModelConfig(tuple(LayerSpec(k) for k in layers), bs), 'prefill', release=release, kv_connector=connector,
                    cache_config=CacheConfig(num_gpu_blocks=64))
    return Scheduler(vc, kv_transfer_config=KVTransferConfig(truncate_block_hashes=truncate))

def p_request(prompt):
    return Request('p', prompt, max_tokens=1, kv_transfer_params=make_kv_transfer_params(do_remote_decode=True))

@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 40), method=st.sampled_from(['eagle', 'mtp']), k=st.integers(1, 4), release=st.sampled_from(['0.34.0', '0.33.0']))
def test_p_side_truncation_keeps_kept_block_hashes(n, method, k, release):
    spec = SpeculativeConfig(method, k, num_mtp_modules=4)
    s = p_scheduler(spec, release)
    L, b = s.num_hash_lookahead_tokens, prefill_backoff(False, num_prefill_lookahead_tokens(spec))
    r = p_request(list(range(100, 100 + n)))
    s.add_request(r)
    cut = 0 < b < n
    assert r.num_tokens == (n - b if cut else n)
    assert len(r.block_hashes) == H.kept_block_hashes(r.num_tokens, 4, L)
    fresh = Request('f', r.all_token_ids, block_hasher=get_request_block_hasher(4, L))
    assert r.block_hashes == fresh.block_hashes[:len(r.block_hashes)]
    r.append_output_token_ids(7)   # P's sampled token: later hashes follow it
    assert r.block_hashes == Request('g', r.all_token_ids, block_hasher=get_request_block_hasher(4, L)).block_hashes

def stale_hashes(n, k, truncate):
    "Hashes of P's computed blocks that differ from a fresh request's over P's own tokens (prompt cut, sampled token)."
    s = p_scheduler(SpeculativeConfig('mtp', k, num_mtp_modules=4), truncate=truncate)
    r = p_request(list(range(100, 100 + n)))
    s.add_request(r)
    r.append_output_token_ids(7)
    fresh = Request('f', r.all_token_ids, block_hasher=get_request_block_hasher(4, s.num_hash_lookahead_tokens)).block_hashes
    computed = r.num_prompt_tokens // 4
    return sum(i >= len(fresh) or h != fresh[i] for i, h in enumerate(r.block_hashes[:computed]))

@pytest.mark.parametrize('n', range(2, 30))
@pytest.mark.parametrize('k', (1, 3))
def test_untruncated_variant_leaves_the_contracts_stale_hashes(n, k):
    spec = SpeculativeConfig('mtp', k, num_mtp_modules=4)
    L, b = H.hash_lookahead_tokens(spec, 'NixlConnector'), prefill_backoff(False, num_prefill_lookahead_tokens(spec))
    assert stale_hashes(n, k, True) == 0
    assert stale_hashes(n, k, False) == H.stale_published_hashes(n, b, 4, L, truncate=False)

def test_untruncated_variant_is_reached():
    assert any(stale_hashes(n, 3, False) for n in range(2, 30))

def test_hashes_do_not_depend_on_when_they_are_read():
    "Read or not read between the truncation and P's sampled token: the same hashes (a lazy property could differ)."
    out = []
    for read in (False, True):
        s = p_scheduler(SpeculativeConfig('mtp', 3, num_mtp_modules=4))
        r = p_request(list(range(100, 127)))
        r.kv_transfer_params['_p_side_truncated'] = False
        s.add_request(r)
        if read: list(r.block_hashes)
        r.append_output_token_ids(7)
        out.append(list(r.block_hashes))
    assert out[0] == out[1]

def test_request_built_with_a_block_size_gets_the_engines_hasher():
    s = p_scheduler(SpeculativeConfig('eagle', 2), '0.34.0')
    r = p_request(list(range(100, 109))); r.block_size = 4
    assert len(r.block_hashes) == 2   # L = 0 before admission
    s.add_request(r)
    assert r.block_hasher.num_hash_lookahead_tokens == 1 == s.num_hash_lookahead_tokens

SPECS = [None if m is None else SpeculativeConfig(m, k, mods) for m, k, mods in spec_grid(ks=(1, 3), modules=(1, 3))]

@pytest.mark.parametrize('release', ('0.34.0', '0.33.0', 'neither'))
def test_scheduler_reads_the_releases_protection(release):
    for spec, conn, pc, dis, disd in hash_cases([c for c in SCHEDULER_CONNECTORS if c]):
        spec = None if spec[0] is None else SpeculativeConfig(spec[0], spec[1], spec[2], disable_lookahead_block_hashes=dis,
                                                              disable_eagle_block_drop=disd)
        role = 'standalone' if conn is None else 'decode'
        vc = VllmConfig(spec, role=role, release=release, kv_connector=conn, cache_config=CacheConfig(enable_prefix_caching=pc))
        s = Scheduler(vc)
        want = (0, False) if release == 'neither' else H.protection(spec, conn, pc, dis, disd, fixed=release == '0.34.0')
        assert (s.num_hash_lookahead_tokens, s.use_eagle_block_drop) == want, (spec, conn, pc, dis, disd)
        assert s.kv_cache_manager.use_eagle == want[1]
        if pc: assert s.block_hasher.num_hash_lookahead_tokens == want[0]

def test_default_release_keeps_the_drop():
    "release=None: the drop wherever the drafter reads the next token, no lookahead (every earlier experiment's engine)."
    for spec in SPECS:
        s = Scheduler(VllmConfig(spec, role='decode'))
        assert (s.num_hash_lookahead_tokens, s.use_eagle_block_drop) == H.protection(spec, 'NixlConnector', disable=True)

def engine_hit(case):
    shared, n, B, L, drop = case
    vc = VllmConfig(None, ModelConfig((LayerSpec('full_attention'),), B))
    kvm = KVCacheManager(get_kv_cache_config(vc, 64), max_model_len=256, use_eagle=drop)
    hasher = get_request_block_hasher(B, L)
    prefix = list(range(100, 100 + shared))
    w = Request('w', prefix + list(range(5000, 5000 + max(n, shared) + 2 * B + L - shared)), block_hasher=hasher)
    kvm.allocate_slots(w, w.num_tokens); kvm.free(w)
    return kvm.get_computed_blocks(Request('r', prefix + list(range(9000, 9000 + n - shared)), block_hasher=hasher))[1] // B

def test_engine_hit_is_the_contracts_hit_on_the_audits_cases():
    bad = [c for c in hit_cases() if engine_hit(c) != H.hit_blocks(*c)]
    assert not bad, bad[:5]
