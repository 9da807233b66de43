"The console script: exit codes and output, run as a user would run it."
import json, shutil, subprocess, sys
from pathlib import Path
import pytest
from vllm_pd_spec import __version__

SCRIPT = shutil.which('vllm-pd-spec', path=str(Path(sys.executable).parent)) or shutil.which('vllm-pd-spec')

def cli(*args):
    "Run the installed console script."
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True)

def test_version():
    r = cli('--version')
    assert r.returncode == 0 and r.stdout.strip() == f'vllm-pd-spec {__version__}'

def test_info_json():
    r = cli('info', '--json')
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d['vllm_pd_spec'] == __version__ and d['torch'] and isinstance(d['cuda'], bool)
    assert 'combine_sampled_and_draft_tokens' in d['fast_paths']

def test_info_says_when_the_installed_vllm_is_newer_than_every_saved_audit(monkeypatch, capsys):
    "A vLLM released after the newest saved audit: `info` says so and how to audit it."
    from vllm_pd_spec import cli as C
    from vllm_pd_spec.audit.main import saved_versions
    real = C.pkg_version
    monkeypatch.setattr(C, 'pkg_version', lambda name: '99.1.0' if name == 'vllm' else real(name))
    assert C.main(['info']) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith('vllm_audit'))
    assert f'vLLM 99.1.0 is newer than the newest saved audit, {saved_versions()[-1]}' in line and 'vllm-pd-spec audit' in line

def test_info_json_names_the_shipped_models():
    "`info --json` lists every shipped model with its card's figures, read from the package's data."
    from vllm_pd_spec.model.drafters import model_cards, MODELS, DATA
    r = cli('info', '--json')
    assert r.returncode == 0, r.stderr
    models = {m['name']: m for m in json.loads(r.stdout)['models']}
    shipped = {n for n, s in MODELS.items() if (DATA / f'{s}.safetensors').exists()}  # a registered variant is listed once its weights ship
    assert set(models) == shipped >= {'tiny-hybrid', 'text-attn', 'text-hybrid'} and models == {m['name']: m for m in model_cards()}
    for name in ('text-attn', 'text-hybrid'):
        m = models[name]
        assert m['params'] > 1_000_000 and 'CPython' in m['corpus']
        assert len(m['per_position_acceptance']) == 4 and set(m['zeroed_kv_cost']) == {'mtp', 'eagle', 'dflash'}
        assert m['passes_gates'] == all(m['gates_passed'].values())
    assert models['text-attn']['passes_gates'] is True and models['text-hybrid']['passes_gates'] is True
    assert (models['text-attn']['tokenizer'], models['text-hybrid']['tokenizer']) == ('bpe1024', 'bytes')
    assert models['tiny-hybrid']['per_position_acceptance'] is None

@pytest.mark.parametrize('args', [['frobnicate'], ['info', '--bogus'], [], ['explain', '--block-size', '100000000'],
                                  ['reproduce', '--json', '/nonexistent/dir/x.json'], ['bench', 'kernel', '--batches', '-5']])
def test_bad_usage_exits_2_with_one_line(args):
    "As a user runs it: exit 2, one line on stderr that starts with the program's name, no traceback, nothing on stdout."
    r = cli(*args)
    assert r.returncode == 2 and r.stdout == ''
    assert r.stderr.startswith('vllm-pd-spec') and r.stderr.count('\n') == 1 and 'Traceback' not in r.stderr, r.stderr

@pytest.mark.parametrize('args', [['info', '--json'], ['info'], ['explain'], ['explain', '--json', '--method', 'mtp']])
def test_a_full_device_is_one_line_not_a_traceback(args):
    "The output cannot be written (stdout on a full device): exit 2, one line naming the cause, no traceback."
    with open('/dev/full', 'w') as full: r = subprocess.run([SCRIPT, *args], stdout=full, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 2 and r.stderr.count('\n') == 1 and 'Traceback' not in r.stderr, r.stderr
    assert r.stderr.startswith(f'vllm-pd-spec {args[0]}: error: cannot write the output') and 'No space left' in r.stderr

@pytest.mark.parametrize('args', [['info'], ['soak', '--requests', '5'], ['audit'], ['explain']])
def test_a_closed_stdout_is_one_line_not_a_traceback(args):
    "Started with stdout closed (`>&-`): exit 2, one line naming the cause, no traceback, before any work."
    r = subprocess.run([SCRIPT, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, close_fds=True,
                       preexec_fn=lambda: __import__('os').close(1))
    assert r.returncode == 2 and r.stderr == 'vllm-pd-spec: error: cannot write the output: stdout is closed\n', r.stderr

def test_explain_reads_a_config_with_a_bom_and_a_large_inkling_quickly(tmp_path):
    "A `config.json` saved with a UTF-8 BOM is read; Inkling's `local_layer_ids` over 100,000 layers take seconds, not minutes."
    import time
    from vllm_pd_spec.vllm_args import read_model_config
    bom = tmp_path / 'config.json'
    bom.write_bytes(b'\xef\xbb\xbf' + json.dumps(dict(model_type='qwen3_next', num_hidden_layers=4, full_attention_interval=4)).encode())
    assert read_model_config(bom)['num_mtp_layers'] == 0
    big = tmp_path / 'ink.json'
    big.write_text(json.dumps(dict(model_type='inkling_model', num_hidden_layers=100_000,
                                   text_config=dict(num_hidden_layers=100_000, local_layer_ids=list(range(0, 100_000, 2))))))
    t = time.perf_counter(); m = read_model_config(big)
    assert time.perf_counter() - t < 60 and len(m['labels']) >= 100_000  # quadratic, it took over 120 s

def test_the_audit_says_that_it_runs_vllms_code():
    "`audit --help` says that the audit executes the installed vLLM's functions, not only reads them."
    r = cli('audit', '--help')
    assert r.returncode == 0 and "runs vLLM's own functions" in ' '.join(r.stdout.split()), r.stdout
