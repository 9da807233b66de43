"`vllm-pd-spec explain`, run as a user runs it."
import json, shutil, subprocess, sys
from pathlib import Path
import pytest
from vllm_pd_spec.explain import explain

SCRIPT = shutil.which('vllm-pd-spec', path=str(Path(sys.executable).parent)) or shutil.which('vllm-pd-spec')

def cli(*args):
    return subprocess.run([SCRIPT, 'explain', *args], capture_output=True, text=True)

def test_table_for_multi_module_mtp_with_mamba():
    r = cli('--method', 'mtp', '-k', '3', '--mtp-modules', '3', '--mamba')
    assert r.returncode == 0, r.stderr
    lines = {l.split()[0]: l.split()[1:] for l in r.stdout.splitlines() if l and l.split()[0].islower() and len(l.split()) >= 3}
    assert lines['prefill_backoff'][:3] == ['2', '1', '!'] and lines['num_prefill_lookahead_tokens'][:3] == ['3', '1', '!']  # vLLM 0.27.1's scheduler: 1 (no runway)
    assert 'Fix 2: the prefill backoff' in r.stdout and 'Fix 5: which rows are spec-decode rows' in r.stdout
    assert '.ipynb' not in r.stdout and 'fix 7' not in r.stdout.lower() and max(map(len, r.stdout.splitlines())) <= 100

def test_json_keys():
    r = cli('--method', 'mtp', '-k', '3', '--mtp-modules', '3', '--mamba', '--sliding-window', '64', '--json')
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert {'fixed', 'legacy', 'hazards'} <= set(j)
    for key in ('num_prefill_lookahead_tokens', 'prefill_backoff', 'remote_prefill_token_count', 'num_lookahead_tokens',
                'extra_retained_tokens', 'runner_prefill_lookahead', 'schedule_num_new_tokens'):
        assert key in j['fixed'] and key in j['legacy']
    assert j['fixed']['extra_retained_tokens'] == 2 and j['fixed']['remote_prefill_token_count'] == 98
    assert all({'key', 'fixed', 'legacy', 'hazard', 'notebook', 'page'} <= set(h) for h in j['hazards'])
    assert all(j['fixed'][h['key']] != j['legacy'][h['key']] for h in j['hazards'])

def test_file_input_and_flag_override(tmp_path):
    f = tmp_path / 'dep.json'
    f.write_text(json.dumps(dict(method='eagle', num_speculative_tokens=2, mamba=True, prompt_len=33, prefix_hit=33)))
    j = json.loads(cli('--file', str(f), '--json').stdout)
    assert j['legacy']['schedule_num_new_tokens'] == 0 and j['fixed']['schedule_num_new_tokens'] > 0
    assert any(h['key'] == 'schedule_num_new_tokens' and 'assert' in h['hazard'] for h in j['hazards'])
    j = json.loads(cli('--file', str(f), '--prompt-len', '40', '--json').stdout)
    assert j['deployment']['prompt_len'] == 40 and j['deployment']['k'] == 2

@pytest.mark.parametrize('args,names', [(['--method', 'foo'], '--method: method='), (['--method', 'mtp', '-k', '0'], '-k: num_speculative_tokens='),
                                        (['--method', 'mtp', '-k', '2', '--mtp-modules', '0'], '--mtp-modules: num_mtp_modules='),
                                        (['--sliding-window', '0'], '--sliding-window: sliding_window='),
                                        (['--role', 'proxy'], '--role: role='), (['--prompt-len', '0'], '--prompt-len: prompt_len='),
                                        (['--block-size', '0'], '--block-size: block_size=')])
def test_bad_input_one_line_exit_2(args, names, capsys):
    "In process (the console script is slow to start): `main` returns 2 and prints one line."
    from vllm_pd_spec.cli import main
    assert main(['explain', *args]) == 2
    out, err = capsys.readouterr()
    assert out == '' and err.count('\n') == 1 and names in err

@pytest.mark.parametrize('args', [['--method', 'foo'], ['--method', 'mtp', '-k', '0']])
def test_bad_input_console_script(args):
    r = cli(*args)
    assert r.returncode == 2 and r.stdout == '' and r.stderr.count('\n') == 1 and 'Traceback' not in r.stderr

def test_bad_file(tmp_path):
    f = tmp_path / 'dep.json'
    f.write_text(json.dumps(dict(method='mtp', k=0)))
    r = cli('--file', str(f))
    assert r.returncode == 2 and "--file key 'k'" in r.stderr and r.stderr.count('\n') == 1
    f.write_text('{not json')
    assert cli('--file', str(f)).returncode == 2
    f.write_text(json.dumps(dict(colour='red')))
    r = cli('--file', str(f))
    assert r.returncode == 2 and 'colour' in r.stderr

def test_no_speculation_has_no_hazards():
    assert explain()['hazards'] == [] and explain(mamba=True)['hazards'] == []

@pytest.mark.parametrize('role', ['standalone', 'prefill', 'decode', 'pd'])
def test_roles(role):
    r = explain(method='mtp', k=3, mtp_modules=3, mamba=True, role=role)
    f = r['fixed']
    assert (f['prefill_backoff'] is None) == (role == 'standalone')
    assert (f['remote_prefill_token_count'] is None) == (role in ('standalone', 'prefill'))
    assert (f['truncate_request_for_prefill'] is None) == (role in ('standalone', 'decode'))

def test_a_new_releases_audit_needs_no_code_edit(tmp_path):
    "Fix 1's form is read from the audit's rows (the numbers vLLM gave), not from a list of releases: the same rows under any release read alike."
    from vllm_pd_spec.explain import release_forms, load_audit, read_audit
    rows = load_audit('0.29.0')
    f = tmp_path / 'audit.json'
    f.write_text(json.dumps(rows))
    for release in ('0.29.0', '9.9.9', None):
        assert release_forms(release, ['NixlConnector'], audit=read_audit(str(f)))['extra_retained_tokens']['form'] == 'intermediate'
    planner = '1. lookahead consumer: sliding-window extra_retained_tokens'
    wrong = [dict(r, counterexample=r['counterexample'].replace('vLLM 0,', 'vLLM 7,')) if r['contract'] == planner else r for r in rows]
    assert release_forms('9.9.9', ['NixlConnector'], audit=wrong)['extra_retained_tokens']['form'] == 'differs'  # no named form gives 7
    named = [dict(r, note='matches on every case: intermediate') if r['contract'] == planner else r for r in wrong]
    assert release_forms('9.9.9', ['NixlConnector'], audit=named)['extra_retained_tokens']['form'] == 'intermediate'  # a new audit's note
    j = json.loads(cli('--audit', str(f), '--method', 'mtp', '-k', '3', '--mtp-modules', '3', '--sliding-window', '64', '--json').stdout)
    assert j['fixed']['extra_retained_tokens'] == 2
