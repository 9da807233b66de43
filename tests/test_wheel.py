"""`make wheel` builds the wheel a host without this repository installs: the package, its data (weights, saved
audits) and its two entry points (the `vllm-pd-spec` command, the vLLM plugin), importable from where it went."""
import subprocess, sys, zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def test_make_wheel_builds_a_wheel_that_installs(tmp_path):
    dist, target = tmp_path/'dist', tmp_path/'site'
    subprocess.run(['make', '--no-print-directory', '-C', str(ROOT), 'wheel', f'DIST={dist}', f'VENV={sys.prefix}'],
                   check=True, capture_output=True, text=True)
    [whl] = dist.glob('vllm_pd_spec-*-py3-none-any.whl')
    names = set(zipfile.ZipFile(whl).namelist())
    from vllm_pd_spec.explain import supported_releases
    assert {f'vllm_pd_spec/data/audit_vllm_{r}.json' for r in supported_releases()} <= names
    assert {'vllm_pd_spec/data/text_attn.safetensors', 'vllm_pd_spec/cli.py', 'vllm_pd_spec/plugin.py'} <= names
    meta = next(n for n in names if n.endswith('.dist-info/entry_points.txt'))
    ep = zipfile.ZipFile(whl).read(meta).decode()
    assert 'vllm-pd-spec = vllm_pd_spec.cli:main' in ep and '[vllm.general_plugins]' in ep
    subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-deps', '--no-index', '--target', str(target), str(whl)],
                   check=True, capture_output=True)
    out = subprocess.run([sys.executable, '-c', 'import vllm_pd_spec; from vllm_pd_spec.explain import supported_releases; '
                          'print(vllm_pd_spec.__file__); print(supported_releases()[-1])'],
                         env={'PYTHONPATH': str(target), 'PATH': '/usr/bin:/bin'}, cwd=tmp_path, capture_output=True, text=True, check=True)
    where, newest = out.stdout.split()
    assert where.startswith(str(target)) and newest == supported_releases()[-1]
    cmd = subprocess.run([sys.executable, str(target/'bin'/'vllm-pd-spec'), '--help'], env={'PYTHONPATH': str(target)}, cwd=tmp_path,
                         capture_output=True, text=True)
    assert cmd.returncode == 0 and 'explain' in cmd.stdout
