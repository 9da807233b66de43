"""Hypothesis state machine over the engine's scheduler: random add / step / finish / abort / preempt / transfer sequences,
with spurious and repeated transfer notices mixed in. The rules are weighted so that most examples schedule tokens (the
machine starts with requests and three steps, a step rule runs one to three steps, aborts and preemptions need something to
act on);
`test_scheduler_state_machine` measures that share and the number of examples, and holds both to their floors."""
from collections import Counter
import pytest
from hypothesis import settings, strategies as st, HealthCheck
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test
from vllm_pd_spec.config import (Fixes, LayerSpec, ModelConfig, SpeculativeConfig, VllmConfig, SchedulerConfig, CacheConfig,
                                 make_kv_transfer_params)
from vllm_pd_spec.engine.request import Request, RequestStatus
from vllm_pd_spec.contracts.slots import drafter_positions_past
from vllm_pd_spec.engine.kv_cache_manager import SlotChecker, get_kv_cache_config
from vllm_pd_spec.engine.outputs import KVConnectorOutput
from vllm_pd_spec.engine.scheduler import Scheduler
from vllm_pd_spec.engine.toy_runner import toy_runner_output

MODELS = {
    'full': (LayerSpec('full_attention'),),
    'full+sw': (LayerSpec('full_attention'), LayerSpec('sliding_window', 8)),
    'full+gdn': (LayerSpec('full_attention'), LayerSpec('gdn')),
    'sw+gdn': (LayerSpec('sliding_window', 12), LayerSpec('gdn')),
}
SPECS = {'none': None, 'eagle2': SpeculativeConfig('eagle', 2), 'dflash2': SpeculativeConfig('dflash', 2),
         'mtp3': SpeculativeConfig('mtp', 3, num_mtp_modules=3)}
PREFIXES = [list(range(100, 140)), list(range(200, 240))]  # shared prefixes make prefix-cache hits likely
BUDGET, NUM_BLOCKS, BS = 24, 28, 4
TALLY = Counter()  # examples, examples that scheduled a token, steps, steps that scheduled a token


class SchedulerMachine(RuleBasedStateMachine):
    "Every fix on: no block leaks or double frees, the budget holds, no step schedules 0 tokens, every KV write\n    lands in its request's slots, and the pool ends full."

    @initialize(model=st.sampled_from(sorted(MODELS)), spec=st.sampled_from(sorted(SPECS)),
                role=st.sampled_from(['standalone', 'prefill', 'decode']), caching=st.booleans(),
                first=st.lists(st.tuples(st.integers(0, 1), st.sampled_from([0, 8, 17, 40]), st.integers(0, 6), st.integers(1, 8)),
                               min_size=1, max_size=3))
    def setup(self, model, spec, role, caching, first):
        vc = VllmConfig(SPECS[spec], ModelConfig(MODELS[model], block_size=BS), role, Fixes(),
                        SchedulerConfig(max_num_batched_tokens=BUDGET, max_num_seqs=4, max_model_len=96),
                        CacheConfig(num_gpu_blocks=NUM_BLOCKS, enable_prefix_caching=caching))
        self.s = Scheduler(vc, get_kv_cache_config(vc, drafter_layer_names=('draft.0',)))
        self.role, self.n, self.scheduled = role, 0, False
        self.checker, self.past = SlotChecker(self.s.kv_cache_manager), drafter_positions_past(SPECS[spec])
        TALLY['examples'] += 1
        for args in first: self.add(*args)  # the machine starts with work, and runs three steps of it (with transfers),
        for _ in range(3): self._step(0, self._kco())  # so that even an example of no further rule schedules something

    def _params(self, n_prompt):
        if self.role == 'prefill': return make_kv_transfer_params(do_remote_decode=True)
        if self.role == 'decode':
            nb = -(-n_prompt // BS)
            return make_kv_transfer_params(do_remote_prefill=True, remote_engine_id='p', remote_request_id=f'p{self.n}',
                                           remote_block_ids=tuple(list(range(1, nb + 1)) for _ in self.s.kv_cache_manager.managers))
        return None

    @rule(prefix=st.integers(0, len(PREFIXES) - 1), shared=st.sampled_from([0, 4, 8, 9, 16, 17, 23, 40]), tail=st.integers(0, 6),
          max_tokens=st.integers(1, 8))
    def add(self, prefix, shared, tail, max_tokens):
        prompt = PREFIXES[prefix][:shared] + list(range(300, 300 + tail))
        if not prompt: prompt = [1]
        self.s.add_request(Request(f'r{self.n}', prompt, max_tokens=max_tokens, kv_transfer_params=self._params(len(prompt))))
        self.n += 1

    def _kco(self, fail=False):
        "Complete every transfer in flight: D's loads (or fail the live ones), P's held sends."
        held = {rid for rid, r in self.s.requests.items()
                if r.status == RequestStatus.WAITING_FOR_REMOTE_KVS or r.is_finished()}
        if self.role == 'decode' and fail:
            live = {r for r in held if not self.s.requests[r].is_finished()}
            return KVConnectorOutput(finished_recving=held - live, failed_recving=live)
        if self.role == 'decode': return KVConnectorOutput(finished_recving=held)
        if self.role == 'prefill': return KVConnectorOutput(finished_sending={r for r in held if self.s.requests[r].is_finished()})
        return None

    def _noise(self, kind, i)->KVConnectorOutput:
        "A notice the worker should not send: for a live request picked by `i`, or for an id nobody knows."
        ids = sorted(self.s.requests) + ['ghost']
        rid = ids[i % len(ids)]
        return KVConnectorOutput(**{kind: {rid}})

    @precondition(lambda self: hasattr(self, 's') and self.s.has_requests())
    @rule(accept=st.integers(0, 3), transfers=st.booleans(), fail=st.booleans(), times=st.integers(1, 3),
          noise=st.sampled_from([None, None, 'finished_sending', 'finished_recving', 'failed_recving']), i=st.integers(0, 50))
    def step(self, accept, transfers, fail, times, noise, i):
        for _ in range(times):
            kco = self._kco(fail) if transfers else None
            if noise:  # a notice the worker did not owe: for a request that may wait on nothing, or for nobody
                extra = self._noise(noise, i)
                kco = extra if kco is None else KVConnectorOutput(kco.finished_sending | extra.finished_sending,
                    kco.finished_recving | extra.finished_recving, kco.failed_recving | extra.failed_recving)
            self._step(accept, kco)

    def _step(self, accept, kco):
        scheduler_output = self.s.schedule()
        TALLY['steps'] += 1
        if scheduler_output.total_num_scheduled_tokens:
            TALLY['steps_scheduling'] += 1
            if not self.scheduled: self.scheduled = True; TALLY['examples_scheduling'] += 1
        assert scheduler_output.total_num_scheduled_tokens <= BUDGET
        assert all(n > 0 for n in scheduler_output.num_scheduled_tokens.values()), scheduler_output.num_scheduled_tokens
        assert all(self.s.requests[r].status == RequestStatus.RUNNING for r in scheduler_output.num_scheduled_tokens)
        for rid, n in scheduler_output.num_scheduled_tokens.items():  # every KV write lands in the request's own slots
            r, drafts = self.s.requests[rid], len(scheduler_output.scheduled_spec_decode_tokens.get(rid, ()))
            end = r.num_computed_tokens  # advanced by schedule()
            self.checker.check_write(rid, 0, range(end - n, end), 'target')
            if end >= r.num_tokens + drafts: self.checker.check_write(rid, 0, range(end, end + self.past), 'drafter')
        assert not self.checker.violations, self.checker.violations[:3]
        self.s.update_from_output(scheduler_output, toy_runner_output(self.s, scheduler_output, token=5, accept=accept, kv_connector_output=kco))

    def _live(self)->list: return [r for r, q in self.s.requests.items() if not q.is_finished()]

    @precondition(lambda self: hasattr(self, 's') and self._live())
    @rule(i=st.integers(0, 50))
    def abort(self, i):
        live = self._live()
        self.s.finish_requests(live[i % len(live)])

    @precondition(lambda self: hasattr(self, 's') and self.s.running)
    @rule()
    def preempt(self):
        self.s._preempt_request(self.s.running.pop())

    @invariant()
    def blocks_accounted(self):
        if not hasattr(self, 's'): return
        pool = self.s.kv_cache_manager.block_pool
        refs = Counter(b.block_id for m in self.s.kv_cache_manager.managers for blocks in m.req_to_blocks.values()
                       for b in blocks if not b.is_null)
        for b in pool.blocks[1:]:
            assert b.ref_cnt == refs.get(b.block_id, 0), f'block {b.block_id}: ref_cnt {b.ref_cnt} != {refs.get(b.block_id, 0)} holders'
            assert (b in pool.free_block_queue) == (b.ref_cnt == 0)
        assert pool.get_num_free_blocks() + len(refs) == NUM_BLOCKS - 1
        assert len(self.s.running) <= 4 and not set(map(id, self.s.running)) & set(map(id, self.s.waiting))

    def teardown(self):
        if not hasattr(self, 's'): return
        s = self.s
        s.finish_requests(list(s.requests))
        scheduler_output = s.schedule()
        assert not scheduler_output.num_scheduled_tokens
        s.update_from_output(scheduler_output, toy_runner_output(s, scheduler_output, kv_connector_output=self._kco()))
        assert not s.requests and s.kv_cache_manager.get_num_free_blocks() == NUM_BLOCKS - 1
        assert not s.finished_recving_kv_req_ids and not s.running and not s.waiting


def test_scheduler_state_machine():
    "The profile's examples (1,000 in CI), each up to 50 rules; at least 80 % of them schedule a token."
    TALLY.clear()
    run_state_machine_as_test(SchedulerMachine, settings=settings(settings.default, stateful_step_count=50, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
    rate = TALLY['examples_scheduling'] / TALLY['examples']
    print(f"\nstate machine: {TALLY['examples']} examples, {rate:.1%} schedule a token; "
          f"{TALLY['steps']} steps, {TALLY['steps_scheduling'] / TALLY['steps']:.1%} of them schedule a token")
    assert TALLY['examples'] >= settings.default.max_examples and rate >= 0.8
