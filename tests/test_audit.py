"""`vllm-pd-spec audit` without vLLM: every probe's fixed / legacy / not-present path on small fake vLLM modules.

The fakes below are plain classes and functions placed in `sys.modules` under vLLM's module names, so the
probes locate them exactly as they locate the real ones. Methods the probes read by source are defined in
this file, so `inspect.getsource` finds them."""
import json, subprocess, sys, types
from types import SimpleNamespace as NS
import pytest
from vllm_pd_spec.audit import harness as H, probes as P, probes_runner as R, probes_connectors as C, main as M

# ---------------------------------------------------------------- fake vLLM pieces
class SamplingParams:
    def __init__(self, max_tokens=16): self.max_tokens, self.skip_reading_prefix_cache = max_tokens, None

class Request:
    "The fields of vllm.v1.request.Request that P-side truncation touches."
    def __init__(self, request_id, prompt_token_ids, sampling_params, pooling_params, block_hasher=None):
        self.request_id, self.prompt_token_ids, self.prompt_embeds = request_id, prompt_token_ids, None
        self._all_token_ids = list(prompt_token_ids)
        self.num_prompt_tokens, self.max_tokens = len(prompt_token_ids), sampling_params.max_tokens
        self.kv_transfer_params = None
    def get_skip_reading_prefix_cache(self): return False
    @property
    def num_tokens(self): return len(self._all_token_ids)

class SpeculativeConfig:
    def use_eagle(self): return self.method in ('eagle', 'eagle3', 'mtp', 'dflash', 'dspark')
    def use_dflash(self): return self.method == 'dflash'
    def use_dspark(self): return self.method == 'dspark'
    def uses_draft_model(self): return self.method == 'draft_model'
    def use_multi_module_mtp(self):
        return self.method == 'mtp' and min(self.draft_model_config.hf_config.num_nextn_predict_layers,
                                            self.num_speculative_tokens) > 1

class FixedVllmConfig:
    "vLLM 0.33.0's properties."
    @property
    def num_prefill_lookahead_tokens(self):
        sc = self.speculative_config
        if sc is None or not sc.use_eagle(): return 0
        return sc.num_speculative_tokens if sc.use_multi_module_mtp() else 1
    @property
    def num_lookahead_tokens(self):
        sc = self.speculative_config
        if sc is None: return 0
        fill_in = sc.use_dspark() and not getattr(sc.draft_model_config.hf_config, 'sample_from_anchor', True)
        if sc.use_dflash() or fill_in: return sc.num_speculative_tokens + 1
        return sc.num_speculative_tokens if sc.use_eagle() or sc.uses_draft_model() else 0

class LegacyVllmConfig:
    @property
    def num_lookahead_tokens(self):  # 0.27.1's numbers: DFlash k + 1, DSpark k in either mode
        sc = self.speculative_config
        if sc is None: return 0
        if sc.use_dflash(): return sc.num_speculative_tokens + 1
        return sc.num_speculative_tokens if sc.use_eagle() or sc.uses_draft_model() else 0

class Pre42971VllmConfig:
    @property
    def num_lookahead_tokens(self):  # before #42971: DFlash gets k like the rest
        sc = self.speculative_config
        return 0 if sc is None or not (sc.use_eagle() or sc.uses_draft_model()) else sc.num_speculative_tokens

class FixedScheduler:
    def __init__(self, vllm_config):
        self.num_prefill_lookahead = vllm_config.num_prefill_lookahead_tokens
    def _reserve_prefill_lookahead(self, request, num_computed_tokens, num_new_tokens):
        remaining = request.num_tokens - num_computed_tokens - num_new_tokens
        if 0 < remaining < self.num_prefill_lookahead: num_new_tokens -= self.num_prefill_lookahead - remaining
        return max(num_new_tokens, 0)
    def add_request(self, request):
        if self.connector is not None: self.connector.on_new_request(request)
    def schedule(self):
        load_kv_async = False
        for request in self.waiting:
            limit_lookahead_tokens = load_kv_async and self.num_lookahead_tokens > 0
            effective_lookahead_tokens = 0 if limit_lookahead_tokens else self.num_lookahead_tokens
            self.kv_cache_manager.allocate_slots(request, 1, num_lookahead_tokens=effective_lookahead_tokens,
                                                 delay_cache_blocks=load_kv_async)

class Scheduler43733:
    "#43733's form: lookahead withheld during an async load for eagle-family drafters only."
    def schedule(self):
        load_kv_async = False
        for request in self.waiting:
            limit_lookahead_tokens = load_kv_async and self.use_eagle
            effective_lookahead_tokens = 0 if limit_lookahead_tokens else self.num_lookahead_tokens
            self.kv_cache_manager.allocate_slots(request, 1, num_lookahead_tokens=effective_lookahead_tokens,
                                                 delay_cache_blocks=load_kv_async)

class LegacyScheduler:
    def __init__(self, vllm_config):
        self.num_prefill_lookahead = 0
    def _reserve_prefill_lookahead(self, request, num_computed_tokens, num_new_tokens): return num_new_tokens
    def schedule(self):
        load_kv_async = False
        for request in self.waiting:
            self.kv_cache_manager.allocate_slots(
                request, 1, num_lookahead_tokens=0 if request.num_computed_tokens == 0 else self.num_lookahead_tokens,
                delay_cache_blocks=load_kv_async)

class FixedNixl:
    "NIXL connector scheduler after #53523 and #55055."
    def _prefill_backoff(self):
        return max(1 if self._has_mamba or self._bounded_replay else 0, self.vllm_config.num_prefill_lookahead_tokens - 1)
    def _get_remote_prefill_token_count(self, n):
        b = self._prefill_backoff()
        return n - b if b and n > b else n
    def _truncate_request_for_prefill(self, request):
        b, params = self._prefill_backoff(), request.kv_transfer_params
        if b and params is not None and not params.get('_p_side_truncated') and request.num_prompt_tokens > b:
            del request.prompt_token_ids[-b:]; del request._all_token_ids[-b:]
            request.num_prompt_tokens -= b; request.max_tokens = 1; params['_p_side_truncated'] = True
    def on_new_request(self, request):
        if (request.kv_transfer_params or {}).get('do_remote_decode'): self._truncate_request_for_prefill(request)
    def get_num_new_matched_tokens(self, request, num_computed_tokens): return 0, False

class MambaOnlyNixl:
    "Before #55055 (ordering already fixed): one token, for Mamba only."
    def _get_remote_prefill_token_count(self, n): return n - 1 if self._has_mamba and n > 1 else n
    def _truncate_mamba_request_for_prefill(self, request):
        params = request.kv_transfer_params
        if params is not None and not params.get('_p_side_truncated') and request.num_prompt_tokens > 1:
            request.prompt_token_ids.pop(); request._all_token_ids.pop()
            request.num_prompt_tokens -= 1; request.max_tokens = 1; params['_p_side_truncated'] = True
    def on_new_request(self, request):
        if (request.kv_transfer_params or {}).get('do_remote_decode') and self._has_mamba:
            self._truncate_mamba_request_for_prefill(request)

class LateTruncatingNixl(MambaOnlyNixl):
    "Before #53523: truncation in get_num_new_matched_tokens, after the prefix lookup."
    def on_new_request(self, request): pass
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        if (request.kv_transfer_params or {}).get('do_remote_decode') and self._has_mamba:
            self._truncate_mamba_request_for_prefill(request)
        return 0, False

class FakeKVCacheManager:
    "Prefix cache of whole blocks of the earlier request's prompt, hit capped at num_tokens - 1."
    block = 4
    def __init__(self, *a, **kw): self.cached = 0
    def get_computed_blocks(self, request):
        ids, B, hit = request.prompt_token_ids, self.block, 0
        while hit + B <= min(self.cached, len(ids)) and ids[hit:hit + B] == list(range(100 + hit, 100 + hit + B)): hit += B
        return None, min(hit, request.num_prompt_tokens - 1) // B * B
    def allocate_slots(self, request, n): pass
    def free(self, request): self.cached = max(self.cached, request.num_prompt_tokens // self.block * self.block)

class V1Runner:
    "vLLM 0.33.0: the count rule, plus a one-token decode row without drafts as a spec row with 0 drafts."
    def _prepare_inputs(self, scheduler_output, num_scheduled_tokens, num_reqs):
        import numpy as np
        if scheduler_output.total == 0: return None
        else:
            num_draft_tokens = np.zeros(num_reqs, dtype=np.int32)
            num_decode_draft_tokens = np.full(num_reqs, -1, dtype=np.int32)
            for req_id, draft_token_ids in scheduler_output.scheduled_spec_decode_tokens.items():
                req_idx = self.input_batch.req_id_to_index[req_id]
                draft_len = len(draft_token_ids)
                num_draft_tokens[req_idx] = draft_len
                if num_scheduled_tokens[req_idx] == draft_len + 1:
                    num_decode_draft_tokens[req_idx] = draft_len
            zero_draft_decode_mask = (self.input_batch.num_computed_tokens_cpu[:num_reqs] >=
                                      self.input_batch.num_prompt_tokens[:num_reqs]) & (num_scheduled_tokens[:num_reqs] == 1)
            num_decode_draft_tokens[(num_decode_draft_tokens < 0) & zero_draft_decode_mask] = 0
            self.num_decode_draft_tokens.np[:num_reqs] = num_decode_draft_tokens

class V1Runner0271:
    "vLLM 0.27.1 (#47466): the count rule only."
    def _prepare_inputs(self, scheduler_output, num_scheduled_tokens, num_reqs):
        import numpy as np
        if scheduler_output.total == 0: return None
        else:
            num_decode_draft_tokens = np.full(num_reqs, -1, dtype=np.int32)
            for req_id, draft_token_ids in scheduler_output.scheduled_spec_decode_tokens.items():
                req_idx = self.input_batch.req_id_to_index[req_id]
                if num_scheduled_tokens[req_idx] == len(draft_token_ids) + 1:
                    num_decode_draft_tokens[req_idx] = len(draft_token_ids)
            self.num_decode_draft_tokens.np[:num_reqs] = num_decode_draft_tokens

class LegacyV1Runner:
    "Before #47466 (vLLM 0.24.0): a row with drafts is a decode row once its prompt is computed."
    def _prepare_inputs(self, scheduler_output, num_scheduled_tokens, num_reqs):
        import numpy as np
        if scheduler_output.total == 0: return None
        else:
            num_decode_draft_tokens = np.full(num_reqs, -1, dtype=np.int32)
            for req_id, draft_token_ids in scheduler_output.scheduled_spec_decode_tokens.items():
                req_idx = self.input_batch.req_id_to_index[req_id]
                if self.input_batch.num_computed_tokens_cpu[req_idx] >= self.input_batch.num_prompt_tokens[req_idx]:
                    num_decode_draft_tokens[req_idx] = len(draft_token_ids)

def _mod(name, **attrs):
    m = types.ModuleType(name); m.__dict__.update(attrs); return m

SCHED = 'vllm.v1.core.sched.scheduler'
NIXL = 'vllm.distributed.kv_transfer.kv_connector.v1.nixl.base_scheduler'
PULL = 'vllm.distributed.kv_transfer.kv_connector.v1.nixl.pull_scheduler'

@pytest.fixture
def fake_vllm(monkeypatch):
    "Install a fake vLLM; returns a function that sets module attributes: fake(module, **attrs)."
    for name in [n for n in sys.modules if n == 'vllm' or n.startswith('vllm.')]: monkeypatch.delitem(sys.modules, name)
    mods = {}
    def fake(name, **attrs):
        parts = name.split('.')
        for i in range(1, len(parts) + 1):
            n = '.'.join(parts[:i])
            if n not in mods:
                mods[n] = _mod(n); mods[n].__path__ = []
                monkeypatch.setitem(sys.modules, n, mods[n])
        mods[name].__dict__.update(attrs)
        return mods[name]
    fake('vllm.v1.request', Request=Request)
    fake('vllm.sampling_params', SamplingParams=SamplingParams)
    fake('vllm.config', SpeculativeConfig=SpeculativeConfig)
    for mod in (P, C): monkeypatch.setattr(mod, 'connector_scheduler', built_scheduler)
    return fake

def built_scheduler(cls, has_mamba, lookahead, producer=True, block_size=16, **attrs):
    "The fakes have no constructors to build through (the real probe uses vLLM's own): only what their methods read."
    vc = NS(num_prefill_lookahead_tokens=lookahead, speculative_config=None, num_speculative_tokens=0)
    return H.build(cls, vllm_config=vc, _has_mamba=has_mamba, _bounded_replay=False, is_producer=producer, **attrs)

def verdicts(findings): return [f.verdict for f in findings]

# ---------------------------------------------------------------- the verdict rule
def test_classify_outcomes():
    fx, lg = (lambda c: c + 1), (lambda c: c)
    f = H.classify('t', 'l', range(3), fx, fx, lg)
    assert (f.verdict, f.cases, f.counterexample) == ('fixed', 3, '0: vLLM 1, fixed 1, legacy 0')
    assert H.classify('t', 'l', range(3), lg, fx, lg).verdict == 'legacy'
    f = H.classify('t', 'l', range(3), lambda c: c + 2, fx, lg)
    assert (f.verdict, f.counterexample) == ('differs', '0: vLLM 2, fixed 1, legacy 0')

def test_a_raise_inside_vllm_is_an_error_never_an_answer():
    "An exception from the code under test ends the row as `error`, naming it, the case and where it came from."
    fx, lg = (lambda c: c + 1), (lambda c: c)
    f = H.classify('t', 'l', range(3), lambda c: 1 // (c - 1), fx, lg, show=lambda c: f'case {c}', note='kept')
    assert (f.verdict, f.cases, f.counterexample) == ('error', 2, None)
    assert f.note.startswith('the probe raised on case 1: ZeroDivisionError: integer division or modulo by zero (at ')
    assert f.note.endswith('; kept') and 'test_audit.py:' in f.note

def test_a_deliberately_broken_probe_shows_error(fake_vllm):
    "A probe whose call no longer fits vLLM's signature (as 0.34.0's ReqMeta.from_request_tracker did) is `error`."
    def from_request_tracker(tracker, block_size, hash_block_size, block_hashes=None): return None
    def broken_probe():
        "Fix 9: a probe calling with the arguments of an older release"
        return [H.classify('9. broken', 'l', range(3), lambda c: from_request_tracker(c, 4, block_hashes=[]),
                           lambda c: 0, lambda c: 1)]
    f, = M.audit([broken_probe])
    assert f.verdict == 'error' and "TypeError: " in f.note and "'hash_block_size'" in f.note and f.counterexample is None
    f, = M.audit([lambda: [H.classify('9. fits', 'l', range(3), lambda c: H.call(NS(), '__class__') and 0, lambda c: 0, lambda c: 1)]])
    assert f.verdict == 'fixed'

def test_accepted_passes_what_the_release_takes():
    def new(a, hash_block_size, b=0): return (a, hash_block_size, b)
    def old(a, b=0): return (a, b)
    assert H.accepted(new, hash_block_size=4, b=1, c=2) == {'hash_block_size': 4, 'b': 1}
    assert old(1, **H.accepted(old, hash_block_size=4, b=1)) == (1, 1)

def test_locate_never_raises():
    assert H.locate('vllm_surely_missing.x:Y') is None and H.locate('json:no_such') is None
    assert H.locate('json:dumps') is json.dumps

# ---------------------------------------------------------------- 1. lookahead
def test_lookahead_property_fixed_and_not_present(fake_vllm):
    assert verdicts(P.probe_prefill_lookahead_property()) == ['not present']
    fake_vllm('vllm.config', VllmConfig=FixedVllmConfig)
    f, = P.probe_prefill_lookahead_property()
    assert f.verdict == 'fixed' and f.cases == len(H.spec_grid())

def test_reserve_prefill_lookahead_paths(fake_vllm):
    assert verdicts(P.probe_reserve_prefill_lookahead()) == ['not present']
    fake_vllm(SCHED, Scheduler=FixedScheduler)
    assert verdicts(P.probe_reserve_prefill_lookahead()) == ['fixed']
    fake_vllm(SCHED, Scheduler=LegacyScheduler)
    f, = P.probe_reserve_prefill_lookahead()
    assert f.verdict == 'legacy' and 'lookahead=2' in f.counterexample

def test_scheduler_consumer_by_source(fake_vllm):
    fake_vllm(SCHED, Scheduler=FixedScheduler)
    sched = [f for f in P.probe_lookahead_consumers() if 'scheduler num_prefill_lookahead' in f.contract]
    assert verdicts(sched) == ['fixed'] and sched[0].how == 'by source'
    fake_vllm(SCHED, Scheduler=LegacyScheduler)  # assigns a constant: follows neither form
    sched = [f for f in P.probe_lookahead_consumers() if 'scheduler num_prefill_lookahead' in f.contract]
    assert verdicts(sched) == ['differs'] and 'derives its own' in sched[0].note

# ---------------------------------------------------------------- 2. backoff
def test_backoff_fixed(fake_vllm):
    fake_vllm(NIXL, NixlBaseConnectorScheduler=FixedNixl)
    assert verdicts(P.probe_backoff()) == ['fixed'] * 3

def test_backoff_mamba_only_is_legacy(fake_vllm):
    fake_vllm(NIXL, NixlBaseConnectorScheduler=MambaOnlyNixl)
    fs = P.probe_backoff()
    assert verdicts(fs) == ['not present', 'legacy', 'legacy']
    assert 'no Mamba, lookahead 2' in fs[2].counterexample

def test_backoff_p_side_uses_the_hooked_subclass(fake_vllm):
    fake_vllm(NIXL, NixlBaseConnectorScheduler=MambaOnlyNixl)
    fake_vllm(PULL, NixlPullConnectorScheduler=LateTruncatingNixl)
    f = P.probe_backoff()[2]
    assert f.verdict == 'legacy' and 'LateTruncatingNixl' in f.note

# ---------------------------------------------------------------- 3. ordering
@pytest.mark.parametrize('cls,verdict', [(FixedNixl, 'fixed'), (MambaOnlyNixl, 'fixed'), (LateTruncatingNixl, 'legacy')])
def test_ordering_replay(fake_vllm, monkeypatch, cls, verdict):
    fake_vllm(SCHED, Scheduler=FixedScheduler)
    fake_vllm(PULL, NixlPullConnectorScheduler=cls)
    fake_vllm('vllm.v1.core.kv_cache_manager', KVCacheManager=FakeKVCacheManager)
    monkeypatch.setattr(P, 'prefix_cache', lambda block_size=4: (FakeKVCacheManager(), None))
    f, = P.probe_ordering()
    assert f.verdict == verdict, f.counterexample
    if verdict == 'legacy': assert P.ASSERT_FIRES in f.counterexample

def test_ordering_not_present(fake_vllm):
    assert verdicts(P.probe_ordering()) == ['not present']

# ---------------------------------------------------------------- 4. slots
def test_num_lookahead_tokens_paths(fake_vllm):
    assert verdicts(R.probe_num_lookahead_tokens()) == ['not present']
    fake_vllm('vllm.config', VllmConfig=FixedVllmConfig)
    f, = R.probe_num_lookahead_tokens()
    assert f.verdict == 'fixed' and f.counterexample.startswith('dflash')  # the case that tells 0.33.0 from 0.22.0
    fake_vllm('vllm.config', VllmConfig=LegacyVllmConfig)  # 0.27.1's count: no extra slot for DSpark fill-in
    f, = R.probe_num_lookahead_tokens()
    assert f.verdict == 'differs' and f.counterexample.startswith('dspark') and 'fill-in' in f.counterexample
    assert 'matches on every case: 0.27.1' in f.note
    fake_vllm('vllm.config', VllmConfig=Pre42971VllmConfig)
    f, = R.probe_num_lookahead_tokens()
    assert f.verdict == 'legacy'

def test_effective_lookahead_by_source(fake_vllm):
    assert verdicts(R.probe_effective_lookahead()) == ['not present']
    fake_vllm(SCHED, Scheduler=FixedScheduler)
    f, = R.probe_effective_lookahead()
    assert (f.verdict, f.how) == ('fixed', 'by source') and 'self.num_lookahead_tokens > 0' in f.note
    fake_vllm(SCHED, Scheduler=Scheduler43733)
    f, = R.probe_effective_lookahead()
    assert f.verdict == 'differs' and f.counterexample.startswith('draft_model') and 'matches on every case: #43733' in f.note
    fake_vllm(SCHED, Scheduler=LegacyScheduler)
    assert verdicts(R.probe_effective_lookahead()) == ['legacy']

# ---------------------------------------------------------------- 5. rows
@pytest.mark.parametrize('runner,verdict,named', [(V1Runner, 'fixed', ''), (V1Runner0271, 'legacy', ''),
                                                  (LegacyV1Runner, 'differs', 'matches on every case: pre-#47466')])
def test_v1_rows_by_source(fake_vllm, runner, verdict, named):
    fake_vllm('vllm.v1.worker.gpu_model_runner', GPUModelRunner=runner)
    f = R.probe_rows()[0]
    assert (f.how, f.verdict) == ('by source', verdict), f.counterexample
    assert f.counterexample and named in f.note

def test_rows_not_present(fake_vllm):
    assert verdicts(R.probe_rows()) == ['not present', 'not present']

# ---------------------------------------------------------------- 6. kernel, connectors
def test_kernel_not_present(fake_vllm):
    assert verdicts(R.probe_kernel(3)) == ['not present']

def test_fuzz_batches_cover_every_row_kind():
    kinds = set()
    for s in range(40):
        b = R.fuzz_batch(s)
        for r, slot in enumerate(b['idx_mapping']):
            p, seq = b['prefill_len'][slot], b['seq_lens'][r]
            nl = b['cu_num_logits'][r + 1] - b['cu_num_logits'][r]
            kinds.add('prefill' if seq <= p else 'tail' if seq - nl < p else 'decode')
    assert kinds == {'prefill', 'tail', 'decode'}

MAMBA_ONLY = """
class MambaOnlyScheduler:
    def _truncate_mamba_request_for_prefill(self, request):
        params = request.kv_transfer_params
        if params is not None and not params.get("_p_side_truncated") and request.num_prompt_tokens > 1:
            request.prompt_token_ids.pop(); request._all_token_ids.pop()
            request.num_prompt_tokens -= 1; request.max_tokens = 1; params["_p_side_truncated"] = True
    def on_new_request(self, request):
        if (request.kv_transfer_params or {}).get("do_remote_decode") and self._has_mamba:
            self._truncate_mamba_request_for_prefill(request)
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        if not (request.kv_transfer_params or {}).get("do_remote_prefill"): return 0, False
        n = request.num_prompt_tokens - (1 if self._has_mamba and request.num_prompt_tokens > 1 else 0) - num_computed_tokens
        return (n, True) if n > 0 else (0, False)

class LateScheduler(MambaOnlyScheduler):
    "Truncates in get_num_new_matched_tokens (after the prefix lookup); has an on_new_request that does not truncate."
    def on_new_request(self, request): pass
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        if (request.kv_transfer_params or {}).get("do_remote_decode") and self._has_mamba:
            self._truncate_mamba_request_for_prefill(request)
        return MambaOnlyScheduler.get_num_new_matched_tokens(self, request, num_computed_tokens)
"""

def test_connector_scan(fake_vllm, tmp_path, monkeypatch):
    root = tmp_path / 'fakeconn'; root.mkdir()
    (root / '__init__.py').write_text('')
    (root / 'mamba_only.py').write_text(MAMBA_ONLY)
    (root / 'other.py').write_text('class Unrelated:\n    def on_new_request(self, request): pass\n')
    (root / 'broken.py').write_text('import surely_not_installed_xyz\ndef _prefill_backoff(self): return 0\n'
                                    'class B:\n    def _prefill_backoff(self): return 0\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    assert sorted(C.truncating_modules('fakeconn')) == ['fakeconn.broken', 'fakeconn.mamba_only']
    found, errors = C.connector_classes('fakeconn', known=('fakeconn.other:Unrelated', 'fakeconn.absent:Nothing'))
    assert sorted(found) == ['fakeconn.mamba_only:LateScheduler', 'fakeconn.other:Unrelated'] and list(errors) == ['fakeconn.broken']
    found.pop('fakeconn.other:Unrelated')
    monkeypatch.setattr(C, 'connector_classes', lambda root=None, known=None: (found, errors))
    fs = C.probe_connectors()
    assert [(f.connector, f.verdict) for f in fs] == [('LateScheduler', 'legacy'), ('broken', 'error')]
    assert "Mamba's single token only" in fs[0].note and 'truncates in: get_num_new_matched_tokens' in fs[0].note
    assert 'D side (asynchronous load): legacy' in fs[0].note

def test_connector_d_side_against_the_contract(fake_vllm, tmp_path, monkeypatch):
    "A connector whose P side follows the contract but whose D side loads Mamba's count is `differs`."
    from vllm_pd_spec.contracts import backoff as B
    ns = {}; exec(MAMBA_ONLY, ns)
    class Half(ns['MambaOnlyScheduler']):
        def on_new_request(self, request):
            if (request.kv_transfer_params or {}).get('do_remote_decode'):
                B.truncate_request_for_prefill(request, B.prefill_backoff(self._has_mamba, self.vllm_config.num_prefill_lookahead_tokens))
    f = C.probe_connector(Half)
    assert f.verdict == 'differs' and f.counterexample.startswith('D: ') and 'P side applies the multi-module MTP backoff' in f.note

def test_synchronous_loader_keeps_one_token():
    assert [C.synchronous_remote_count(n, b) for n, b in [(9, 0), (9, 1), (9, 3), (3, 3), (1, 0)]] == [8, 8, 6, 2, 0]

# ---------------------------------------------------------------- the registry
def test_registry_orders_by_fix_and_finds_new_modules(tmp_path, monkeypatch):
    names = [p.__name__ for p in H.registered_probes()]
    assert names[:3] == ['probe_prefill_lookahead_property', 'probe_lookahead_consumers', 'probe_reserve_prefill_lookahead']
    assert names[-1] == 'probe_connectors' and 'probe_kernel' in names
    pkg = tmp_path / 'fakeaudit'; pkg.mkdir()
    (pkg / '__init__.py').write_text('')
    (pkg / 'probes_extra.py').write_text('from vllm_pd_spec.audit.harness import probe, Finding\n'
                                         '@probe(fix=13)\ndef probe_extra(): return [Finding("13. extra", "x", "fixed", 1)]\n')
    (pkg / 'helpers.py').write_text('raise RuntimeError("not a probe module, never imported")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(H, 'PROBES', dict(H.PROBES))
    got = [p.__name__ for p in H.registered_probes('fakeaudit')]
    assert got.index('probe_extra') == got.index('probe_connectors') - 1  # after every fix (7-12 are the beyond probes), before the connectors
    assert [f.contract for f in M.audit([H.PROBES[('fakeaudit.probes_extra', 'probe_extra')]])] == ["13. extra"]

# ---------------------------------------------------------------- the runner and the CLI
def test_audit_turns_a_crashing_probe_into_an_error_row():
    def probe_boom():
        "Fix 9: boom"
        raise RuntimeError('kaput')
    f, = M.audit([probe_boom])
    assert f.verdict == 'error' and 'kaput' in f.note

def test_table_and_json_shapes():
    fs = [H.Finding('c', 'vllm/x.py:f', 'fixed', 3, 'a: vLLM 1, fixed 1, legacy 0'),
          H.Finding('connector: X', 'vllm/y.py:X', 'legacy', 2, 'b', connector='X')]
    t = M.table(fs)
    assert t.splitlines()[0].split() == ['contract', 'where', 'in', 'vLLM', 'verdict', 'cases', 'first', 'counterexample']
    d = [f.as_dict() for f in fs]
    assert all({'contract', 'location', 'verdict', 'cases', 'counterexample'} <= set(x) for x in d)
    assert 'connector' not in d[0] and d[1]['connector'] == 'X'
    assert M.markdown_table(fs).count('\n') == 3

def _saved_files():
    import importlib.resources
    d = importlib.resources.files('vllm_pd_spec') / 'data'
    return sorted(p.name for p in d.iterdir() if p.name.startswith('audit_') and 'vllm_' in p.name and p.name != 'audit_model_config.json')

def test_saved_audits_load():
    assert len(M.saved_versions()) >= 2 and all(any(f'vllm_{v}.json' in n for n in _saved_files()) for v in M.saved_versions())
    for v in M.saved_versions():
        assert all(f['verdict'] in H.VERDICTS for f in M.saved_audit(v))

@pytest.mark.parametrize('name', _saved_files())
def test_saved_audits_are_clean(name):
    "Every saved audit (with and without the plugin): no `error` row, no exception as a counterexample, every verdict backed."
    import importlib.resources
    rows = json.loads((importlib.resources.files('vllm_pd_spec') / 'data' / name).read_text())
    assert not [r['contract'] for r in rows if r['verdict'] == 'error']
    assert not [r['contract'] for r in rows if 'raises ' in (r.get('counterexample') or '')]  # an exception is never an answer
    assert all(r.get('counterexample') for r in rows if r['verdict'] in ('legacy', 'differs'))
    assert all(r.get('cases', 0) > 0 for r in rows if r['verdict'] != 'not present')
    assert len({r['contract'] for r in rows}) == len(rows)

def test_run_audit_exits_2_with_install_hint_when_vllm_is_missing(monkeypatch, capsys):
    monkeypatch.setattr(M, 'import_vllm', lambda: "ModuleNotFoundError: No module named 'vllm'")
    assert M.run_audit(NS(json=None, markdown=False)) == 2
    err = capsys.readouterr().err
    newest = M.saved_versions()[-1]
    assert 'make audit-release V=' in err and f'pip install --no-deps vllm=={newest}' in err

def test_cli_audit_without_vllm(monkeypatch):
    from vllm_pd_spec.cli import main
    monkeypatch.setattr(M, 'import_vllm', lambda: 'ImportError: no vllm')
    assert main(['audit', '--json', 'unused.json']) == 2

# ---------------------------------------------------------------- the speculator's per-slot re-prefill (no vLLM)
from vllm_pd_spec.audit import probes_speculator as PS
from vllm_pd_spec.contracts import backoff as B

def _fake_schedule(self, num_new_tokens, num_computed_tokens, scheduled_running_reqs, prefill_scheduled):
    pad_spec_decode = False
    if not prefill_scheduled:
        if self.num_spec_tokens > 0 and num_new_tokens == 1 and (scheduled_running_reqs or num_computed_tokens > 0):
            pad_spec_decode = True
    return pad_spec_decode

def test_pad_condition_lifted_and_evaluated():
    test = PS.pad_condition(_fake_schedule)
    assert test == 'self.num_spec_tokens > 0 and num_new_tokens == 1 and (scheduled_running_reqs or num_computed_tokens > 0)'
    # 0.33.0's backoff: D computes k - 1 >= 2 tokens at k >= 3, a full step with nothing padded; 0.27.1's: every k padded
    assert [PS.first_step(k, False, B.prefill_backoff, test)[2] for k in (1, 2, 3, 4)] == [True, True, False, False]
    assert [PS.first_step(k, False, B.legacy_prefill_backoff, test)[2] for k in (1, 2, 3, 4)] == [True] * 4
    assert PS.first_step(4, True, B.legacy_prefill_backoff, test) == (11, 1, True)
    idle = 'self.num_spec_tokens > 0 and num_new_tokens == 1 and scheduled_running_reqs'  # 0.27.1's form: a busy D only
    assert PS.first_step(3, False, B.legacy_prefill_backoff, idle, busy=False)[2] is False

def test_reprefill_forms_and_provenance():
    assert PS.reprefill_per_slot(4, True, True) == ('previous occupant', (-4, -3, -2))
    assert PS.reprefill_per_slot(2, True, False) == ('zeros', (-2,))
    assert PS.reprefill_per_slot(1, True, True) == PS.reprefill_per_slot(3, False, True) == ('none', ())
    assert all(PS.reprefill_reset_on_add(k, p, r) == ('none', ()) for k in (1, 2, 3, 4) for p in (0, 1) for r in (0, 1))
    assert PS.provenance(PS.A_TOKENS + 3, PS.A_TOKENS + 2, 9) == 'previous occupant'
    assert PS.provenance(0, 0.0, 9) == 'zeros' and PS.provenance(PS.B_FIRST + 10, 7.0, 9) == 'own'
    assert PS.provenance(PS.FIRST_SAMPLED, 111.0, 11) == 'own' and PS.provenance(PS.B_FIRST + 12, 111.0, 11) == 'mixed'  # N-1 reads the sampled token
    assert len(PS.reprefill_cases()) == 16 and PS.show_reprefill((2, True, False)) == 'k=2, GDN, fresh slot'

def test_finding_detail_is_optional():
    assert 'detail' not in H.Finding('c', 'x', 'fixed', 1).as_dict()
    assert H.Finding('c', 'x', 'fixed', 1, detail=[{'k': 2}]).as_dict()['detail'] == [{'k': 2}]
