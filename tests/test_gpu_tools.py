"The GPU run's tools: `make gpu-test` offline, the wheels it carries, the per-fix timer's import parse, the benchmark's CPU dry run."
import importlib.util, json, os, re, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]

def tool(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / 'tools' / f'{name}.py')
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

def test_gpu_test_offline_installs_nothing_from_the_network():
    "With GPU_PY the target makes no venv and installs only the carried wheels (--no-index), then runs the notebooks and the tests."
    out = subprocess.run(['make', '-s', '-n', 'gpu-test', 'GPU_PY=python3', 'WHL=wheels'], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    lines = [l for l in out.splitlines() if l.strip()]
    assert len(lines) == 3 and 'venv' not in out
    assert '--no-index' in lines[0] and lines[0].rstrip().endswith('wheels/*.whl')
    assert 'nbdev-test --flags "gpu slow"' in lines[1] and 'pytest tests/ -q -m "gpu or slow"' in lines[2]
    default = subprocess.run(['make', '-s', '-n', 'gpu-test'], capture_output=True, text=True, cwd=ROOT).stdout
    assert '--no-index' not in default  # without GPU_PY: the venv with the dev extras, as before

def test_gpu_wheels_pinned_once():
    "Every wheel the offline run carries is pinned to one version, and nbdev-test's and the package's needs are among them."
    pins = [l.split('==') for l in (ROOT / 'tools' / 'gpu_wheels.txt').read_text().splitlines() if l and not l.startswith('#')]
    assert all(len(p) == 2 and re.fullmatch(r'[0-9][0-9.]*', p[1]) for p in pins), pins
    names = [p[0].lower().replace('_', '-') for p in pins]
    assert len(names) == len(set(names)) and {'nbdev', 'execnb', 'ipython', 'fastcore', 'traitlets'} <= set(names)

def test_importtime_parse():
    "`importtime` reads `-X importtime`'s lines: the slowest imports first, cumulative at least self."
    rows = tool('reproduce_times').importtime('import json', top=3)
    assert rows and rows == sorted(rows, key=lambda r: -r['cumulative_ms'])
    assert all(r['cumulative_ms'] >= r['self_ms'] >= 0 and r['module'] for r in rows)
    assert 'json' in {r['module'] for r in tool('reproduce_times').importtime('import json', top=100)}

@pytest.mark.slow
def test_engine_bench_dry_run(tmp_path):
    "The benchmark on a CPU, tiny: every path's tokens equal the batched path's; k MTP forwards per step batched, k per row per request."
    out = tmp_path / 'b.json'
    subprocess.run([sys.executable, str(ROOT / 'tools' / 'engine_bench.py'), '--device', 'cpu', '--dry-run', '--out', str(out)],
                   check=True, capture_output=True, cwd=ROOT, env={'PYTHONPATH': os.pathsep.join([str(ROOT), os.environ.get('PYTHONPATH', '')]), 'PATH': '/usr/bin:/bin'})  # the caller's path too: where the GPU run's site lies
    run = json.loads(out.read_text())
    assert run['complete'] and all(all(v.values()) for v in run['float64_paths_equal'].values())
    k = run['args']['k']
    for r in run['rows']:
        assert r['same_outputs_as_batched']
        assert r['drafter_forwards_per_step_max'] == (k * r['batch'] if r['path'] == 'per-request' else k)
