"""Named ablations: one fix's form swapped inside vLLM's own code at runtime, in the running process (the wheel is never edited).

Each ablation names the released line it changes and the form it puts there. A source ablation rewrites one expression of
a vLLM function from that function's own source (it must occur exactly once, else `AblationRefused` and nothing changes)
and compiles the result in the function's own module; a wrapper ablation calls vLLM's own method after one added step.
`apply(name)` installs one, `remove(name)` puts vLLM's original back; `describe()` lists them with the sha256 of the
original source they were checked against.
"""
import hashlib, importlib, inspect, linecache, textwrap
from dataclasses import dataclass

class AblationRefused(RuntimeError):
    "The installed vLLM's code is not the code the ablation was written for; nothing was changed."

@dataclass(frozen=True)
class Ablation:
    "One change to one vLLM function."
    fix:int # the fix whose form it swaps
    target:str # 'module:attribute' or 'module:Class.method'
    form:str # 'legacy' or 'fixed': the form it puts into vLLM
    label:str # what the code then is
    old:str='' # source ablation: the released expression ...
    new:str='' # ... and what replaces it
    wrap:str='' # wrapper ablation: the name of a wrapper factory in this module

ABLATIONS = {
    # fix 3: vLLM 0.25.0's NIXL scheduler truncates a P-side prompt in get_num_new_matched_tokens, after the scheduler's
    # prefix lookup; #53523 truncates in on_new_request, before it. The later call is then a no-op (`_p_side_truncated`).
    'ordering_53523': Ablation(
        3, 'vllm.distributed.kv_transfer.kv_connector.v1.nixl.base_scheduler:NixlBaseConnectorScheduler.on_new_request',
        'fixed', "#53523's order: on_new_request truncates (do_remote_decode and _has_mamba), before the prefix lookup",
        wrap='_truncate_on_new_request'),
    # fix 5, model runner V1: 0.25.0 ships #47466's count rule; before #47466 a row with drafts was a spec-decode row
    # once its prompt was computed (the 0.24.0 rule), which sends D's placeholder-padded prompt tail to the prefill path.
    'row_rule_pre_47466_v1': Ablation(
        5, 'vllm.v1.worker.gpu_model_runner:GPUModelRunner._prepare_inputs',
        'legacy', 'main between #45237 and #47466: the 0.24.0 row rule with the placeholder padding (model runner V1)',
        old='num_scheduled_tokens[req_idx] == draft_len + 1',
        new='self.input_batch.num_computed_tokens_cpu[req_idx] >= self.input_batch.num_prompt_tokens[req_idx]'),
    # fix 5, model runner V2: the same rule in MambaHybridModelState.prepare_attn (0.24.0: has drafts and not prefilling).
    'row_rule_pre_47466_v2': Ablation(
        5, 'vllm.v1.worker.gpu.model_states.mamba_hybrid:MambaHybridModelState.prepare_attn',
        'legacy', 'main between #45237 and #47466: the 0.24.0 row rule with the placeholder padding (model runner V2)',
        old='input_batch.num_scheduled_tokens == num_draft_tokens_per_req + 1',
        new='~input_batch.is_prefilling_np[: input_batch.num_reqs]'),
    # fix 6, model runner V2: the kernel writes the last sampled token only where the first logit slot is past the prompt;
    # before the guard it wrote it unconditionally, over D's prompt-tail token x_N.
    'guard_off': Ablation(
        6, 'vllm.v1.worker.gpu.input_batch:_combine_sampled_and_draft_tokens_kernel',
        'legacy', 'main between #45237 and #47466: the kernel without the guard (unconditional write), with the padding',
        old='NUM_NEW_SAMPLED_TOKENS > 0 and first_logit_seq_pos >= prefill_len',
        new='NUM_NEW_SAMPLED_TOKENS > 0'),
}

def _truncate_on_new_request(original):
    "Fix 3's fixed order on 0.25.0's own helpers: truncate before vLLM's own on_new_request (heartbeat tracking) runs."
    def on_new_request(self, request):
        params = request.kv_transfer_params
        if params is not None and params.get('do_remote_decode') and self._has_mamba:
            self._truncate_mamba_request_for_prefill(request)
        return original(self, request)
    on_new_request.__wrapped__ = original
    return on_new_request

def _resolve(target:str):
    "(owner, attribute name, current value) for 'module:attr' or 'module:Class.method'."
    mod_name, _, path = target.partition(':')
    owner = importlib.import_module(mod_name)
    *parents, name = path.split('.')
    for p in parents: owner = getattr(owner, p)
    return owner, name, inspect.getattr_static(owner, name)

def _function_of(value):
    "The plain Python function behind a method or a Triton kernel."
    return getattr(value, 'fn', value)

def source_sha(target:str)->str:
    "sha256 (16 hex digits) of the target's released source."
    return hashlib.sha256(inspect.getsource(_function_of(_resolve(target)[2])).encode()).hexdigest()[:16]

def ablated_source(src:str, old:str, new:str, target:str)->str:
    "`src` with `old` replaced by `new`; `AblationRefused` unless `old` occurs exactly once."
    n = src.count(old)
    if n != 1: raise AblationRefused(f'{target}: the released expression {old!r} occurs {n} times in its source (expected once)')
    return src.replace(old, new)

def _compile_in(module, src:str, name:str, tag:str):
    "Define `src` (one function, decorators included) in `module`'s namespace under a file name inspect can read back."
    filename = f'<ablation {tag}: {module.__name__}.{name}>'
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)  # Triton's jit reads the source back
    ns = {}
    exec(compile(src, filename, 'exec'), module.__dict__, ns)
    return ns[name]

_originals = {}  # ablation name -> (owner, attribute, original value)

def ablate_function(value, # a vLLM function, method or Triton kernel
                    old:str, new:str, # the released expression and its replacement
                    tag:str, # the ablation's name (shown in tracebacks)
                    module=None, # the namespace to compile in (default: the function's own module)
                   ):
    "`value` recompiled from its own source with `old` replaced by `new` (a Triton kernel comes back a Triton kernel)."
    fn = _function_of(value)
    src = ablated_source(textwrap.dedent(inspect.getsource(fn)), old, new, f'{fn.__module__}.{fn.__qualname__}')
    return _compile_in(module or inspect.getmodule(fn), src, fn.__name__, tag)

def build(name:str):
    "The replacement object of ablation `name` (checked against the installed vLLM), not yet installed."
    a = ABLATIONS[name]
    owner, attr, value = _resolve(a.target)
    return globals()[a.wrap](value) if a.wrap else ablate_function(value, a.old, a.new, name)

def apply(name:str)->None:
    "Install ablation `name` (a no-op if it is installed)."
    if name in _originals: return
    owner, attr, value = _resolve(ABLATIONS[name].target)
    new = build(name)
    _originals[name] = (owner, attr, value)
    setattr(owner, attr, new)

def remove(name:str|None=None)->None:
    "Put vLLM's original back (every installed ablation when `name` is None)."
    for n in ([name] if name else list(_originals)):
        if n in _originals:
            owner, attr, value = _originals.pop(n)
            setattr(owner, attr, value)

def applied()->list: return sorted(_originals)

def describe()->dict:
    "Per ablation: fix, target, form, label, the swapped expression, and the released source's sha256 here."
    out = {}
    for n, a in ABLATIONS.items():
        try: sha = source_sha(a.target)
        except Exception as e: sha = f'unavailable: {type(e).__name__}: {e}'
        out[n] = dict(fix=a.fix, target=a.target, form=a.form, label=a.label, old=a.old or None, new=a.new or None,
                      wrapper=a.wrap or None, released_source_sha256=sha)
    return out
