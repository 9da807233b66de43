"""Every command and flag of `vllm-pd-spec`, fed hostile values in process through `main(argv)`: wrong types, signs,
huge values, empty strings, unicode, bad and deeply nested JSON, unwritable and odd output paths.

Each input must end within `LIMIT_S`, with exit status 0 (a value that is valid after all) or 2 and exactly
one line on stderr that names the flag; never a traceback; and for status 2, no work started: the experiments, the
kernel sweep and run, and the audit are replaced by recorders, and none of them may have been called."""
import contextlib, io, json, os, shlex, signal, time
from collections import Counter
import pytest
from vllm_pd_spec import cli
from vllm_pd_spec.audit import main as audit_main
from vllm_pd_spec import reproduce
from vllm_pd_spec.experiments.common import ExperimentResult
from vllm_pd_spec.kernels import bench

LIMIT_S = 10.0  # per input, on a shared 2-core machine (most inputs take a few milliseconds)

INTS = ['abc', '1.5', '', ' ', '0x10', '1e3', 'nan', 'inf', 'true', 'None', '-1', '-5', '0', '٣', '１', '²', '½', 'é',
        '😀', '\x7f', '3 3', '100000000', '100000000000', '9' * 40, '-' + '9' * 40]
STRS = ['', ' ', 'é', '😀', 'NONE', 'mtp ', 'x' * 10_000, '\u202e', '-', '\\', '%s', '{}', 'mtp\nx']

def _files(d):
    "Input files for `explain --file`: a name -> path, made in the folder `d`."
    deep = '[' * 200_000 + ']' * 200_000
    texts = {'deep': deep, 'deep_value': '{"k": ' + deep + '}', 'not_json': '{not json', 'list': '[]', 'string': '"mtp"',
             'null': 'null', 'empty': '', 'k_str': '{"k": "x"}', 'k_inf': '{"k": 1e400}', 'k_bool': '{"k": true}',
             'huge_prompt': '{"prompt_len": 100000000000}', 'float_prompt': '{"prompt_len": 1e3}', 'unknown': '{"colour": 1}',
             'method_obj': '{"method": {"a": 1}}', 'method_list': '{"method": ["mtp"]}', 'nul': '{"method": "mtp\\u0000"}',
             'dup_keys': '{"k": 2, "k": -1}', 'big': '{"x": "' + 'y' * 2_000_000 + '"}', 'hit_gt_prompt': '{"prompt_len": 5, "prefix_hit": 9}'}
    out = {}
    for name, t in texts.items():
        (d / f'{name}.json').write_text(t); out[name] = str(d / f'{name}.json')
    (d / 'binary.json').write_bytes(bytes(range(256)) * 10); out['binary'] = str(d / 'binary.json')
    (d / 'utf16.json').write_text('{"k": 2}', encoding='utf-16'); out['utf16'] = str(d / 'utf16.json')
    os.mkfifo(d / 'fifo'); out['fifo'] = str(d / 'fifo')
    out.update(folder=str(d), missing=str(d / 'missing.json'), empty_path='', dev_zero='/dev/zero')
    return out

def _out_paths(d):
    "Output paths no file can be written to (as root, too)."
    (d / 'a_file').write_text('x'); os.mkfifo(d / 'out_fifo')
    return {'empty': '', 'blank': ' ', 'no_folder': '/nonexistent/dir/x.json', 'folder': str(d), 'proc': '/proc/x.json',
            'under_a_file': str(d / 'a_file' / 'x.json'), 'fifo': str(d / 'out_fifo'), 'long': str(d / ('x' * 5000)),
            'nul': str(d / 'a\0b')}

def cases(d)->list:
    "(argv, the flag the error must name or None) for every command and flag."
    files, outs = _files(d / 'in'), _out_paths(d / 'out')
    c = [([], None), (['--bogus'], None), (['é'], None), (['explain', 'extra'], 'extra'), (['info', '--json', '1'], '1'),
         (['info', '--bogus'], '--bogus'), (['--version', 'x'], None)]
    # explain: every count flag alone and with a method that reads it; the string flags; --file; flags that take no value
    for flag in ('-k', '--mtp-modules', '--sliding-window', '--prompt-len', '--prefix-hit', '--block-size'):
        for v in INTS:
            c.append((['explain', flag, v], flag))
            c.append((['explain', '--method', 'mtp', flag, v], flag))
    for flag in ('--method', '--role'): c += [(['explain', flag, v], flag) for v in STRS]
    c += [(['explain', '--file', p], '--file') for p in files.values()]
    c += [(['explain', '--mamba', 'yes'], 'yes'), (['explain', '--json', 'x'], 'x'), (['explain', '--method'], '--method')]
    c += explain_deployer_cases(d / 'in', files)
    # reproduce: output path first (with flags that would otherwise run), fixes, device, transport
    for p in outs.values():
        c += [(['reproduce', '--json', p], '--json'), (['reproduce', '--fix', '1', '--quick', '--json', p], '--json')]
    c += [(['reproduce', '--fix', v], '--fix') for v in INTS + ['7', '1 2']]
    c += [(['reproduce', '--fix'], '--fix'), (['reproduce', '--device', 'cuda'], '--device'), (['reproduce', '--quick', 'x'], 'x')]
    c += [(['reproduce', '--device', v], '--device') for v in STRS] + [(['reproduce', '--transport', v], '--transport') for v in STRS]
    # bench: the positional, counts, seeds, paths; flags that only the GPU run reads are refused on the CPU sweep
    c += [(['bench', v], None) for v in STRS + ['kernels']] + [(['bench'], None)]
    for flag in ('--batches', '--seed'): c += [(['bench', 'kernel', flag, v], flag) for v in INTS + ['4294967296', '10001']]
    for p in outs.values():
        c += [(['bench', 'kernel', '--save', p], '--save'), (['bench', 'kernel', '--cpu-dry-run', '--save', p], '--save')]
    c += [(['bench', 'kernel', '--vllm', v], '--vllm') for v in ['', '/nonexistent', str(d)]]
    c += [(['bench', 'kernel', '--cpu-dry-run', '--vllm', v], '--vllm') for v in ['', ' ', '/nonexistent', str(d / 'in')]]
    c += [(['bench', 'kernel', '--tests'], '--tests'), (['bench', 'kernel', '--cpu-dry-run', '--batches', '5'], '--batches'),
          (['bench', 'kernel', '--cpu-dry-run', '--sweep'], '--sweep')]
    # audit
    c += [(['audit', '--json', p], '--json') for p in outs.values()] + [(['audit', '--markdown', 'x'], 'x'), (['audit', '--bogus'], '--bogus')]
    return c

def explain_deployer_cases(d, files:dict)->list:
    "`explain`'s deployer inputs: a `vllm serve` line (or its file), a model's config.json, the release, the plugin."
    serve = lambda extra: f'vllm serve ./m {extra}'
    sc, kv = (lambda v: serve(f"--speculative-config {shlex.quote(v)}")), (lambda v: serve(f"--kv-transfer-config {shlex.quote(v)}"))
    deep = '[' * 100_000 + ']' * 100_000
    lines = [sc('{bad'), sc('[]'), sc('null'), sc(deep), sc('{"method": "medusa", "num_speculative_tokens": 2}'),
             sc('{"method": "foo", "num_speculative_tokens": 2}'), sc('{"method": "mtp"}'), sc('{"method": 1, "num_speculative_tokens": 2}'),
             sc('{"method": "mtp", "num_speculative_tokens": 1e400}'), sc('{"method": "mtp", "num_speculative_tokens": ' + '9' * 40 + '}'),
             sc('{"method": "mtp", "num_speculative_tokens": true}'), sc('{"method": "mtp", "num_speculative_tokens": -3}'),
             kv('{"kv_connector": "Foo", "kv_role": "kv_both"}'), kv('{"kv_connector": "NixlConnector"}'),
             kv('{"kv_connector": "NixlConnector", "kv_role": "both"}'), kv('{"kv_connector": "MultiConnector", "kv_role": "kv_both"}'),
             kv('{"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": [{}]}}'),
             kv(deep), serve('--speculative-config'), serve("--speculative-config '{"), 'vllm serve a b',
             serve('--speculative-config.method foo --speculative-config.num_speculative_tokens 2'),
             serve('--speculative-config.method mtp --speculative-config.num_speculative_tokens ' + deep), serve('--block-size.x 3'),
             serve('--speculative-config [] --speculative-config.method mtp')]
    lines += [serve(f'--block-size {shlex.quote(v)}') for v in INTS] + [serve(f'--max-model-len {shlex.quote(v)}') for v in INTS]
    release = ['explain', '--vllm-version', '0.33.0']
    c = [(release + ['--explain-vllm-args', v], '--explain-vllm-args') for v in lines + STRS]
    (d / 'serve.txt').write_text(sc('{bad'))
    c += [(release + ['--explain-vllm-args', p], '--explain-vllm-args')
          for p in (files['folder'], str(d / 'missing.txt'), files['fifo'], files['binary'], files['big'], str(d / 'serve.txt'))]
    cfgs = {'unknown_arch': {'model_type': 'gemma3', 'architectures': ['Gemma3ForCausalLM']}, 'no_type': {},
            'layers_str': {'model_type': 'llama', 'num_hidden_layers': '4'}, 'layers_huge': {'model_type': 'llama', 'num_hidden_layers': 10 ** 30},
            'layers_zero': {'model_type': 'deepseek_v3', 'num_hidden_layers': 0},
            'types_bad': {'model_type': 'qwen3_next', 'num_hidden_layers': 2, 'layer_types': ['mamba', 'x']},
            'types_short': {'model_type': 'qwen3_next', 'num_hidden_layers': 3, 'layer_types': ['full_attention']},
            'interval_0': {'model_type': 'qwen3_next', 'num_hidden_layers': 4, 'full_attention_interval': 0},
            'mtp_neg': {'model_type': 'qwen3_next', 'num_hidden_layers': 4, 'num_nextn_predict_layers': -1},
            'text_cfg_list': {'model_type': 'qwen3_5', 'text_config': []},
            'ink_local': {'model_type': 'inkling_model', 'num_hidden_layers': 2, 'local_layer_ids': [5]},
            'ink_window': {'model_type': 'inkling_model', 'num_hidden_layers': 2, 'sliding_window_size': 1e400},
            'ink_mtp': {'model_type': 'inkling_mm_model', 'text_config': {'num_hidden_layers': 2}, 'mtp_config': []}}
    for name, cfg in cfgs.items():
        (d / f'cfg_{name}.json').write_text(json.dumps(cfg)); files[f'cfg_{name}'] = str(d / f'cfg_{name}.json')
    c += [(release + ['--model-config', p], '--model-config') for p in files.values()]
    c += [(release + ['--method', 'mtp', '-k', '2', '--model-config', str(d / 'cfg_llama.json')], '--model-config')]
    (d / 'cfg_llama.json').write_text(json.dumps({'model_type': 'llama', 'num_hidden_layers': 2}))   # no MTP layers for method mtp
    c += [(['explain', '--vllm-version', v], '--vllm-version') for v in STRS + ['0.30.0', '0.33', 'latest', '0.33.0 ', '9' * 40]]
    c += [(['explain', '--vllm-version', '0.27.1', '--plugin'], '--plugin'), (['explain', '--plugin', 'x'], 'x')]
    return c

class Recorder:
    "Stands in for the work a command would start; records the calls."
    def __init__(self, ret): self.ret, self.calls = ret, []
    def __call__(self, *a, **k): self.calls.append(a); return self.ret(*a, **k) if callable(self.ret) else self.ret

@pytest.fixture
def work(monkeypatch):
    "The work behind each command, replaced by recorders (arguments are what is under test, not the work)."
    res = lambda fix, *a: ExperimentResult(fix, 'stub', 'm', 0, 0, 'holds', True, True)
    rec = dict(experiment=Recorder(res), sweep=Recorder(dict(batches=1, backend='reference', mismatches=0, fixed_overwrites=0,
               step_mismatches=0, step_fixed_lost=0, legacy_overwrites=0, step_legacy_lost=0, legacy_batches_hit=0)),
               suite=Recorder(({}, 0)), audit=Recorder([]))
    monkeypatch.setattr(reproduce, 'run_experiment', rec['experiment'])
    monkeypatch.setattr(bench, 'sweep', rec['sweep']); monkeypatch.setattr(bench, 'run_suite', rec['suite'])
    monkeypatch.setattr(bench, 'find_input_batch', lambda p=None: p, raising=False)
    monkeypatch.setattr(audit_main, 'import_vllm', lambda: None); monkeypatch.setattr(audit_main, 'audit', rec['audit'])
    monkeypatch.setattr(audit_main, 'vllm_version', lambda: 'stub')
    return rec

def _alarm(signum, frame): raise TimeoutError(f'past {LIMIT_S} s')

def run(argv)->tuple:
    "`(exit status, stdout, stderr, seconds)` of `main(argv)`, or TimeoutError past `LIMIT_S`."
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm); signal.setitimer(signal.ITIMER_REAL, LIMIT_S)
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = cli.main(argv)
    finally: signal.setitimer(signal.ITIMER_REAL, 0); signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue(), err.getvalue(), time.perf_counter() - t0

def test_every_flag_fails_cleanly_or_runs(tmp_path, work):
    (tmp_path / 'in').mkdir(); (tmp_path / 'out').mkdir()
    tally, slowest, bad = Counter(), (0.0, None), []
    for argv, flag in cases(tmp_path):
        for r in work.values(): r.calls.clear()
        rc, out, err, s = run(argv)
        slowest = max(slowest, (s, argv[:4]), key=lambda x: x[0])
        tally[rc] += 1
        ok = 'Traceback' not in out + err and rc in (0, 2)
        if rc == 2 and argv not in ([], ['--version', 'x']) and argv[:1] != ['bench'] or rc == 2 and flag:
            ok &= err.count('\n') == 1 and (flag is None or flag.split()[0] in err or repr(flag) in err)
            ok &= not any(r.calls for r in work.values())  # refused before any work
        if rc == 0: ok &= not err.strip() or argv[:1] in (['reproduce'], ['bench'])
        if not ok: bad.append((argv[:6], rc, err[-300:]))
    print(f'\nCLI fuzz: {sum(tally.values())} inputs, exit statuses {dict(tally)}; slowest {slowest[0]:.2f} s {slowest[1]}')
    assert not bad, '\n'.join(f'{a!r:.150} -> {rc}: {e!r:.200}' for a, rc, e in bad[:30])
    assert tally[2] >= 0.9 * sum(tally.values())

def test_output_path_is_checked_before_the_experiments(tmp_path, work):
    "`reproduce --json` to a folder that does not exist, a folder, or '' fails at once: no experiment has run."
    for p in ('/nonexistent/dir/x.json', str(tmp_path), ''):
        rc, out, err, s = run(['reproduce', '--json', p])
        assert rc == 2 and err.count('\n') == 1 and '--json' in err and not work['experiment'].calls and s < 1.0
    rc, out, err, s = run(['reproduce', '--fix', '3', '3', '--json', str(tmp_path / 'r.json')])
    assert rc == 0 and [a[0] for a in work['experiment'].calls] == [3] and (tmp_path / 'r.json').exists()  # `--fix 3 3`: once

def test_the_probe_leaves_nothing_behind(tmp_path, work):
    "Checking an output path creates no file: a refused run leaves the folder as it was."
    rc, *_ = run(['reproduce', '--device', 'cuda', '--json', str(tmp_path / 'r.json')])
    assert rc == 2 and list(tmp_path.iterdir()) == []

@pytest.mark.parametrize('argv', [['explain', '--block-size', '100000000'], ['explain', '--prompt-len', '100000000000'],
                                  ['explain', '--method', 'mtp', '-k', '64', '--block-size', '65536']])
def test_huge_values_end_quickly(argv, work):
    rc, out, err, s = run(argv)
    assert rc in (0, 2) and s < LIMIT_S and 'Traceback' not in err

@pytest.mark.parametrize('argv,flag', [(['explain', '-k', '٣', '--method', 'mtp'], '-k'), (['explain', '-k', '3_0', '--method', 'mtp'], '-k'),
                                       (['explain', '--prompt-len', '１０'], '--prompt-len'), (['bench', 'kernel', '--batches', '٣'], '--batches'),
                                       (['reproduce', '--fix', '٣'], '--fix'), (['reproduce', '--quick', '--full'], '--full'),
                                       (['reproduce', '--fix', '3', '--fix', '4'], '--fix'), (['explain', '--method', 'mtp', '-k', '2', '-k', '3'], '-k'),
                                       (['reproduce', '--json', 'a.json', '--json', 'b.json'], '--json')])
def test_non_ascii_digits_and_conflicts_refused(argv, flag, work):
    "Digits of other scripts and `_` are refused (Python's `int` takes them), and so are conflicting or repeated flags."
    rc, out, err, s = run(argv)
    assert rc == 2 and err.count('\n') == 1 and flag in err and not any(r.calls for r in work.values()), err

@pytest.mark.parametrize('cmd', [['reproduce', '--fix', '3'], ['audit']])
def test_json_to_a_full_device_is_one_line(cmd, work):
    "`--json /dev/full`: the work is done, the write fails: exit 2 and one line, not an `OSError` traceback."
    rc, out, err, s = run(cmd + ['--json', '/dev/full'])
    assert rc == 2 and err.count('\n') == 1 and 'cannot write the output' in err and 'Traceback' not in err, err

def test_explain_with_every_flag_at_its_maximum_is_quick(work):
    "The largest prompt in the smallest blocks with the widest drafter: seconds at most (the state-slot lists were 10 M long)."
    from vllm_pd_spec.explain import LIMITS
    for method in ('mtp', 'dflash', 'eagle'):
        argv = ['explain', '--json', '--mamba', '--method', method, '-k', '64', '--block-size', '1', '--prompt-len', str(LIMITS['prompt_len'][1]),
                '--sliding-window', str(LIMITS['sliding_window'][1])] + (['--mtp-modules', '64'] if method == 'mtp' else [])
        rc, out, err, s = run(argv)
        assert rc == 0 and s < 3.0, (method, s, err)

def test_state_slot_answer_does_not_depend_on_leading_nulls():
    "`explain` reads the Mamba lists' tails only: the answer with a capped prompt equals the one with the whole prompt."
    from vllm_pd_spec.contracts import state_slots as S
    for k in (1, 2, 5):
        for kp in (1, k):
            for B, n in ((1, 2000), (4, 997), (16, 3000)):
                ns = min(n, B * (max(k, kp) + 3))
                for pair in (S.pair_state_slots, S.legacy_pair_state_slots):
                    got = [S.received_state(pair(p, kp, d, k, 'align'), p, kp, d, k)
                           for p, d in [(S.mamba_block_ids(m, B, kp, 'align', 1), S.mamba_block_ids(m, B, k, 'align', 1001)) for m in (n, ns)]]
                    assert got[0] == got[1], (k, kp, B, n)
