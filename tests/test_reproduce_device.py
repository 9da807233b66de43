"`reproduce --device cuda` runs the whole table: an experiment that runs on the CPU only runs there and its row says so."
import argparse, importlib, torch
from vllm_pd_spec import reproduce as R
from vllm_pd_spec.experiments.common import ExperimentResult

def test_cuda_runs_every_fix(monkeypatch, capsys, tmp_path):
    "With a CUDA device (mocked here when there is none), every fix runs: fixes 1 and 3 on the CPU, saying so; the rest on CUDA."
    if not torch.cuda.is_available(): monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    asked = {}
    for fix, (name, mod) in R.EXPERIMENTS.items():
        def fake(device='cpu', fix=fix, name=name, **kw):
            asked[fix] = device
            return ExperimentResult(fix, name, 'm', 0, 0, 'inv', True, True)
        monkeypatch.setattr(importlib.import_module(mod), 'run', fake)
    p = argparse.ArgumentParser(); R.add_reproduce_args(p)
    rc = R.run_reproduce(p.parse_args(['--device', 'cuda', '--json', str(tmp_path / 'r.json')]))
    out = capsys.readouterr().out
    assert rc == 0 and asked == {1: 'cpu', 2: 'cuda', 3: 'cpu', 4: 'cuda', 5: 'cuda', 6: 'cuda'}
    rows = {line.split('|')[1].strip(): line for line in out.splitlines() if line.startswith('| [')}
    assert 'Ran on cpu (runs on the CPU only' in rows['[1](95a_fix1_lookahead.ipynb)'] and 'Ran on cpu (no model runs' in rows['[3](95c_fix3_truncation_ordering.ipynb)']
    assert not any('Ran on' in rows[f'[{f}]({R.FIX_PAGES[f][0]})'] for f in (2, 4, 5, 6))

def test_cpu_rows_say_nothing_extra(monkeypatch, capsys):
    "The default (CPU) table is unchanged: no row says where it ran."
    for fix, (name, mod) in R.EXPERIMENTS.items():
        monkeypatch.setattr(importlib.import_module(mod), 'run',
                            lambda device='cpu', fix=fix, name=name, **kw: ExperimentResult(fix, name, 'm', 0, 0, 'inv', True, True))
    p = argparse.ArgumentParser(); R.add_reproduce_args(p)
    assert R.run_reproduce(p.parse_args([])) == 0 and 'Ran on' not in capsys.readouterr().out
