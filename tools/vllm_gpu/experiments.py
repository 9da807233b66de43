"""Fixes 3, 5 and 6 in vLLM's own engine on one GPU, legacy vs fixed through the named ablations (`ablations.py`).

    python experiments.py all OUT_DIR --ckpt CKPT --prompts prompts.json   # every experiment, in parallel processes
    python experiments.py fix3 ARM OUT.json ...                            # one P instance (ARM: shipped | ordering_53523)
    python experiments.py pd RUNNER OUT.json ...                           # one P/D pair over NIXL (RUNNER: v1 | v2)

Every engine is vLLM's offline `LLM` with its engine core in the process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), so an
ablation installed in the process is the code vLLM runs, and a scheduler assertion reaches the caller with its frame.
P and D are two processes on the one GPU, each with its own NIXL agent (`NixlConnector`, kv_producer / kv_consumer).
"""
import argparse, json, os, signal, subprocess, sys, time, traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
K = 1  # MTP drafts per step
MAX_TOKENS, BACKGROUND_TOKENS = 64, 192
ENV = dict(VLLM_ENABLE_V1_MULTIPROCESSING='0',  # engine core in this process: ablations apply, assertions surface
           VLLM_USE_FLASHINFER_SAMPLER='0',  # else the sampler imports FlashInfer
           VLLM_SSM_CONV_STATE_LAYOUT='DS',  # 0.25.0's NIXL worker asserts it for a GDN model's conv state (base_worker.py:301)
           HF_HUB_OFFLINE='1', TOKENIZERS_PARALLELISM='false', PYTHONUNBUFFERED='1')
DTYPE = 'bfloat16'  # 0.25.0's GDN prefill kernel refuses float32 (fla/ops/chunk.py: chunk_gated_delta_rule)
ARMS = dict(v1=('standalone', 'standalone_p', 'shipped', 'row_rule_pre_47466_v1', 'shipped_again'),
            v2=('standalone', 'standalone_p', 'shipped', 'guard_off', 'row_rule_pre_47466_v2', 'shipped_again'))
# name: (command, arm or runner, NIXL kv_buffer_device). Host-memory staging (kv_buffer_device='cpu') is left out: 0.25.0's
# NIXL worker fails on a hybrid model's per-layer cache lists there (initialize_host_xfer_buffer: 'list' has no 'shape').
JOBS = {'fix3_shipped': ('fix3', 'shipped', 'cuda'), 'fix3_ordering_53523': ('fix3', 'ordering_53523', 'cuda'),
        'pd_v1': ('pd', 'v1', 'cuda'), 'pd_v2': ('pd', 'v2', 'cuda')}
PORTS = {name: 5600 + 20 * i for i, name in enumerate(JOBS)}  # D (or fix 3's P) on the port, the pair's P on port + 10

def engine_kwargs(ckpt:str, kv_role:str|None, spec:bool=True, prefix_caching:bool=False, buffer:str='cuda')->dict:
    "The `LLM(...)` arguments every engine here shares, plus its role."
    kw = dict(model=ckpt, tokenizer=ckpt, dtype=DTYPE, enforce_eager=True, seed=0, max_model_len=8192, max_num_seqs=32,
              gpu_memory_utilization=0.05, kv_cache_memory_bytes=2 << 30, attention_backend='TRITON_ATTN',
              gdn_prefill_backend='triton', enable_prefix_caching=prefix_caching)
    if prefix_caching: kw['mamba_cache_mode'] = 'align'
    if spec: kw['speculative_config'] = dict(method='mtp', num_speculative_tokens=K)
    if kv_role: kw['kv_transfer_config'] = dict(kv_connector='NixlConnector', kv_role=kv_role, kv_buffer_device=buffer)
    return kw

def engine_facts(llm)->dict:
    "What the engine was built with (read back from vLLM's own config)."
    import vllm
    vc = llm.llm_engine.vllm_config
    c, s = vc.cache_config, vc.scheduler_config
    return dict(vllm=vllm.__version__, vllm_file=vllm.__file__, block_size=c.block_size, mamba_block_size=c.mamba_block_size,
                mamba_cache_mode=c.mamba_cache_mode, prefix_caching=c.enable_prefix_caching,
                async_scheduling=getattr(s, 'async_scheduling', None), chunked_prefill=s.enable_chunked_prefill,
                max_num_batched_tokens=s.max_num_batched_tokens, use_v2_model_runner=vc.use_v2_model_runner,
                hybrid_kv_cache_manager=not s.disable_hybrid_kv_cache_manager,
                spec=None if vc.speculative_config is None else dict(method=vc.speculative_config.method,
                                                                     k=vc.speculative_config.num_speculative_tokens),
                kv_role=None if vc.kv_transfer_config is None else vc.kv_transfer_config.kv_role,
                kv_buffer_device=None if vc.kv_transfer_config is None else vc.kv_transfer_config.kv_buffer_device)

def vllm_frame(e:BaseException)->dict:
    "The exception and the innermost frame inside vLLM's package where it was raised."
    tb = traceback.extract_tb(e.__traceback__)
    inner = [f for f in tb if f'{os.sep}vllm{os.sep}' in f.filename] or tb
    f = inner[-1]
    sep = f'{os.sep}vllm{os.sep}'
    where = 'vllm/' + f.filename.split(sep, 1)[-1] if sep in f.filename else os.path.basename(f.filename)
    return dict(type=type(e).__name__, message=str(e)[:500], file=where, line=f.lineno, function=f.name,
                source=(f.line or '').strip())

def _write(path, obj): Path(path).write_text(json.dumps(obj, indent=1))

def _sampling(max_tokens:int, params:dict|None=None):
    from vllm import SamplingParams
    return SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True,
                          extra_args=None if params is None else {'kv_transfer_params': params})

def _tokens(prompts): 
    from vllm.inputs import TokensPrompt
    return [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]

# ---- fix 3: a P instance with prefix caching, the same prompt twice ----

def fix3(arm:str, out:str, ckpt:str, prompts:dict):
    "Two pairs of identical prompts on one P instance (unaligned, then block-aligned N-1): served, or the engine dies."
    import ablations
    res = dict(experiment='fix3', arm=arm, kv_buffer_device='cuda', ablation=None if arm == 'shipped' else ablations.describe()[arm], pairs=[])
    t0 = time.time()
    try:
        if arm != 'shipped': ablations.apply(arm)
        from vllm import LLM
        llm = LLM(**engine_kwargs(ckpt, 'kv_producer', spec=False, prefix_caching=True))
    except Exception as e:
        traceback.print_exc()
        res['error'] = vllm_frame(e); _write(out, res)
        return res
    res.update(engine=engine_facts(llm), engine_seconds=round(time.time() - t0, 1))
    B, text = res['engine']['block_size'], prompts['long_text']
    cases = [('N-1 not a block multiple', 2 * B + 5, 0), ('N-1 a block multiple', 2 * B + 1, 2 * B + 13)]  # disjoint text
    for label, n, offset in cases:
        prompt = text[offset:offset + n]
        pair = dict(case=label, num_prompt_tokens=n, requests=[])
        res['pairs'].append(pair)
        if len(prompt) != n: pair['error'] = f'the text holds {len(text)} tokens: too short for block {B}'; continue
        for which in ('first', 'second'):
            try:
                o = llm.generate(_tokens([prompt]), _sampling(1, {'do_remote_decode': True}), use_tqdm=False)[0]
                pair['requests'].append(dict(request=which, served=True, token=o.outputs[0].token_ids[0],
                                             num_cached_tokens=o.num_cached_tokens,
                                             remote_num_tokens=(o.kv_transfer_params or {}).get('remote_num_tokens')))
            except Exception as e:
                pair['requests'].append(dict(request=which, served=False, error=vllm_frame(e)))
                res['engine_died'] = dict(case=label, request=which, **vllm_frame(e))
                _write(out, res)
                return res
            _write(out, res)
    res['engine_died'] = None
    _write(out, res)
    return res

# ---- fixes 5 and 6: a P/D pair over NIXL, D's rows through the released or the ablated code ----

def p_server(runner:str, ckpt:str, conn, log:str, port:int, buffer:str):
    "The prefill instance: prefills on request and returns each request's transfer parameters."
    sys.stdout = sys.stderr = open(log, 'a', buffering=1)
    os.environ.update(ENV, VLLM_USE_V2_MODEL_RUNNER='1' if runner == 'v2' else '0', VLLM_NIXL_SIDE_CHANNEL_PORT=str(port))
    try:
        from vllm import LLM
        llm = LLM(**engine_kwargs(ckpt, 'kv_producer', buffer=buffer))
        conn.send(('ready', engine_facts(llm)))
        while True:
            kind, prompts, max_tokens = conn.recv()
            if kind == 'stop': break
            if kind == 'prefill':
                sps = [_sampling(1, {'do_remote_decode': True}) for _ in prompts]  # one dict each: vLLM marks it truncated
                outs = llm.generate(_tokens(prompts), sps, use_tqdm=False)
                conn.send(('params', [o.kv_transfer_params for o in outs]))
            else:
                outs = llm.generate(_tokens(prompts), _sampling(max_tokens), use_tqdm=False)
                conn.send(('outputs', [list(o.outputs[0].token_ids) for o in outs]))
    except Exception as e:
        traceback.print_exc()
        conn.send(('error', vllm_frame(e)))

class PaddedTails:
    "Counts, per arm, D's rows that are a prompt's one-token tail padded with placeholder drafts (vLLM's pad_spec_decode)."
    def __init__(self):
        from vllm.v1.core.sched import scheduler as S
        self.S, self.original, self.count = S, S.Scheduler.schedule, 0
        counter = self
        def schedule(sched, *a, **kw):
            out = counter.original(sched, *a, **kw)
            for r in out.scheduled_new_reqs:
                drafts = out.scheduled_spec_decode_tokens.get(r.req_id, [])
                if drafts and all(t == -1 for t in drafts) and len(r.prompt_token_ids or []) - r.num_computed_tokens == 1:
                    counter.count += 1
            return out
        S.Scheduler.schedule = schedule

def _compare(outs:list, ref:list)->dict:
    "Exact-match share, first-token share and mean first differing position of `outs` against `ref`."
    first = [next((i for i, (a, b) in enumerate(zip(o, r)) if a != b), None) for o, r in zip(outs, ref)]
    return dict(requests=len(ref), equal=sum(f is None and len(o) == len(r) for f, o, r in zip(first, outs, ref)),
                exact_match_rate=sum(f is None for f in first) / len(ref),
                first_token_match_rate=sum(f != 0 for f in first) / len(ref),
                mean_first_divergence=(sum(f for f in first if f is not None) / max(1, sum(f is not None for f in first))
                                       if any(f is not None for f in first) else None),
                first_divergence=first)

def _recv(conn, timeout:float):
    if not conn.poll(timeout): raise TimeoutError(f'the prefill instance did not answer in {timeout:.0f} s')
    msg = conn.recv()
    if msg[0] == 'error': raise RuntimeError(f'prefill instance: {msg[1]}')
    return msg

def pd(runner:str, out:str, ckpt:str, prompts:dict, log:str, port:int, buffer:str='cuda'):
    "One P/D pair; D serves the measured prompts (with background requests running) per arm."
    import multiprocessing as mp
    import ablations
    os.environ['VLLM_NIXL_SIDE_CHANNEL_PORT'] = str(port)
    measured, background = prompts['pd_prompts'], prompts['background']
    res = dict(experiment='pd', runner=runner, kv_buffer_device=buffer, k=K, max_tokens=MAX_TOKENS, background_tokens=BACKGROUND_TOKENS,
               num_prompts=len(measured), num_background=len(background), prompt_len=len(measured[0]), arms={},
               ablations={a: ablations.describe()[a] for a in ARMS[runner] if a in ablations.ABLATIONS})
    ctx = mp.get_context('spawn')
    here, there = ctx.Pipe()
    p = ctx.Process(target=p_server, args=(runner, ckpt, there, log + '.p', port + 10, buffer), daemon=True)
    p.start()
    try:
        from vllm import LLM
        t0 = time.time()
        llm = LLM(**engine_kwargs(ckpt, 'kv_consumer', buffer=buffer))
        res.update(d_engine=engine_facts(llm), d_engine_seconds=round(time.time() - t0, 1))
        res['p_engine'] = _recv(here, 600)[1]
        _write(out, res)
        tails = PaddedTails()
        ref = None
        for arm in ARMS[runner]:
            t1, row = time.time(), dict()
            ablation = arm if arm in ablations.ABLATIONS else None
            try:
                if ablation: ablations.apply(ablation)
                tails.count = 0
                if arm == 'standalone_p':
                    here.send(('standalone', measured, MAX_TOKENS))
                    outs = _recv(here, 300)[1]
                    bg = None
                else:
                    params = [None] * len(measured)
                    if arm not in ('standalone',):
                        here.send(('prefill', measured, 1))
                        params = _recv(here, 300)[1]
                        row['remote_num_tokens'] = sorted({(q or {}).get('remote_num_tokens') for q in params})
                    sps = [_sampling(MAX_TOKENS, q) for q in params] + [_sampling(BACKGROUND_TOKENS)] * len(background)
                    signal.alarm(300)
                    got = llm.generate(_tokens(measured + background), sps, use_tqdm=False)
                    signal.alarm(0)
                    toks = [list(o.outputs[0].token_ids) for o in got]
                    outs, bg = toks[:len(measured)], toks[len(measured):]
                row.update(outputs=outs, background_outputs=bg, padded_tail_rows=tails.count, ablation=ablation,
                           ablations_installed=ablations.applied())
                if arm == 'standalone': ref, res['reference_background'] = outs, bg
                if ref is not None:
                    row.update(_compare(outs, ref))
                    if bg is not None: row['background_equal'] = sum(a == b for a, b in zip(bg, res['reference_background']))
            except Exception as e:
                signal.alarm(0)
                traceback.print_exc()
                row['error'] = vllm_frame(e)
            finally:
                if ablation: ablations.remove(ablation)
            row['seconds'] = round(time.time() - t1, 1)
            res['arms'][arm] = row
            _write(out, res)
            if 'error' in row and isinstance(row['error'], dict) and row['error']['type'] in ('TimeoutError', 'AlarmTimeout'): break
    except Exception as e:
        traceback.print_exc()
        res['error'] = vllm_frame(e)
        _write(out, res)
    finally:
        try: here.send(('stop', None, 0))
        except Exception: pass
        p.join(30)
        if p.is_alive(): p.kill()
    return res

class AlarmTimeout(Exception): pass
def _alarm(signum, frame): raise AlarmTimeout('a generate call ran past 300 s')

# ---- everything, in parallel processes ----

def run_all(out_dir:str, ckpt:str, prompts_file:str, deadline:float)->dict:
    "Every experiment in its own process; merge their JSON into OUT_DIR/vllm_itself.json."
    out_dir = Path(out_dir); out_dir.mkdir(parents=True, exist_ok=True)
    only = [j for j in os.environ.get('VLLM_ITSELF_JOBS', '').split(',') if j]  # a subset by name, else every job
    unknown = sorted(set(only) - set(JOBS))
    if unknown: raise SystemExit(f'VLLM_ITSELF_JOBS names no job {unknown}; jobs: {sorted(JOBS)}')
    jobs, procs, t0 = {n: JOBS[n] for n in (only or JOBS)}, {}, time.time()
    for name, (what, which, buffer) in jobs.items():
        env = dict(os.environ, **ENV, OMP_NUM_THREADS='2', VLLM_NIXL_SIDE_CHANNEL_PORT=str(PORTS[name]),
                   VLLM_USE_V2_MODEL_RUNNER='1' if which == 'v2' else '0')
        log = open(out_dir / f'{name}.log', 'w')
        nice = ['nice', '-n', '10'] if name.endswith('_host') else []  # the fallback pairs yield the CPU to the main ones
        procs[name] = subprocess.Popen([*nice, sys.executable, __file__, what, which, str(out_dir / f'{name}.json'), '--ckpt', ckpt,
                                        '--prompts', prompts_file, '--log', log.name, '--port', str(PORTS[name]),
                                        '--buffer', buffer], env=env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
    while any(p.poll() is None for p in procs.values()) and time.time() - t0 < deadline: time.sleep(2)
    status = {}
    for name, p in procs.items():
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL); p.wait(); status[name] = 'killed at the deadline'
        else: status[name] = f'exit {p.returncode}'
    merged = dict(seconds=round(time.time() - t0, 1), status=status, results={})
    for name in jobs:
        f = out_dir / f'{name}.json'
        merged['results'][name] = json.loads(f.read_text()) if f.exists() else None
    _write(out_dir / 'vllm_itself.json', merged)
    with open(out_dir / 'logs.txt', 'w') as lf:
        for name in jobs:
            for suffix in ('', '.p'):
                f = out_dir / f'{name}.log{suffix}'
                if f.exists():
                    text = f.read_text(errors='replace')
                    lf.write(f'===== {name}{suffix} ({len(text)} chars; last 1.5 MB) =====\n{text[-1_500_000:]}\n')
    return merged

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('what', choices=('all', 'fix3', 'pd'))
    ap.add_argument('rest', nargs='+')
    ap.add_argument('--ckpt', required=True)
    ap.add_argument('--prompts', required=True)
    ap.add_argument('--log', default='/tmp/vllm_itself.log')
    ap.add_argument('--deadline', type=float, default=480)
    ap.add_argument('--port', type=int, default=5600)
    ap.add_argument('--buffer', default='cuda')
    a = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    signal.signal(signal.SIGALRM, _alarm)
    prompts = json.loads(Path(a.prompts).read_text())
    if a.what == 'all':
        m = run_all(a.rest[0], a.ckpt, a.prompts, a.deadline)
        print(json.dumps(summary(m), indent=1))
    elif a.what == 'fix3': fix3(a.rest[0], a.rest[1], a.ckpt, prompts)
    else: pd(a.rest[0], a.rest[1], a.ckpt, prompts, a.log, a.port, a.buffer)

def summary(m:dict)->dict:
    "The figures of a merged run, short enough to print."
    out = dict(seconds=m['seconds'], status=m['status'])
    for name, r in m['results'].items():
        if r is None: out[name] = None; continue
        if r['experiment'] == 'fix3':
            out[name] = dict(block=(r.get('engine') or {}).get('block_size'), died=r.get('engine_died'),
                             served=[[q['served'] for q in p['requests']] for p in r['pairs']])
        else:
            out[name] = {arm: {k: row.get(k) for k in ('exact_match_rate', 'first_token_match_rate', 'padded_tail_rows',
                                                       'background_equal', 'seconds', 'error')} for arm, row in r['arms'].items()}
            if 'error' in r: out[name]['error'] = r['error']
    return out

if __name__ == '__main__':
    main()
