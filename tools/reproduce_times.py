"""`vllm-pd-spec reproduce --fix N` per fix in a fresh process each, timed with the process start included; where the start goes.

    PYTHONPATH=. python3 tools/reproduce_times.py --device cuda --out nbs/runs/reproduce_times_h200.json

Per fix: the process's wall time (start, imports, CUDA's initialisation, the experiment, exit), its exit status, the
experiment's own `seconds` from `--json`, the device it ran on, and the rest (wall - seconds: the process start and
exit). Then what a start costs, each probe a fresh process timed the same way: the interpreter alone, `import torch`,
`import torch` and CUDA's initialisation (`torch.zeros(1, device='cuda')`), and the `reproduce` module and every
experiment module imported (`-X importtime`'s ten slowest, cumulative). `--whole` adds one `reproduce` of every
experiment in one process. Writes one JSON file.
"""
import argparse, json, os, platform, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # this tree's package, for its registry of fixes
from vllm_pd_spec.registry import experiments  # noqa: E402

CLI = 'import sys; from vllm_pd_spec.cli import main; sys.exit(main())'  # what the `vllm-pd-spec` script runs
MODULES = [module.rsplit('.', 1)[1] for _, module in experiments().values()]  # the fixes' experiment modules

def timed(args:list, env=None)->tuple:
    "`(wall seconds, exit status, stderr)` of one fresh process."
    t = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    return time.perf_counter() - t, p.returncode, p.stderr

def importtime(code:str, top:int=10)->list:
    "The `top` slowest imports of `code` (cumulative microseconds) in a fresh process."
    _, _, err = timed([sys.executable, '-X', 'importtime', '-c', code])
    rows = []
    for line in err.splitlines():
        if not line.startswith('import time:') or 'cumulative' in line: continue
        self_us, cum_us, name = line[len('import time:'):].split('|')
        rows.append(dict(module=name.strip(), self_ms=int(self_us) / 1e3, cumulative_ms=int(cum_us) / 1e3))
    return sorted(rows, key=lambda r: -r['cumulative_ms'])[:top]

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--device', default='cuda', choices=['cpu', 'cuda'])
    ap.add_argument('--fixes', default=','.join(map(str, experiments())))
    ap.add_argument('--whole', action='store_true', help='also time one reproduce of every fix in one process')
    ap.add_argument('--out', required=True)
    a = ap.parse_args(argv)
    run = dict(machine=platform.processor() or platform.machine(), cpus=os.cpu_count(), python=platform.python_version(),
               device=a.device, started=time.strftime('%Y-%m-%d %H:%M:%S'), fixes={}, startup={})
    with tempfile.TemporaryDirectory() as d:
        for fix in [int(x) for x in a.fixes.split(',')]:
            js = Path(d) / f'fix{fix}.json'
            wall, rc, err = timed([sys.executable, '-c', CLI, 'reproduce', '--fix', str(fix), '--device', a.device, '--json', str(js)])
            res = json.loads(js.read_text())[0] if js.is_file() else {}
            run['fixes'][fix] = dict(wall_s=round(wall, 2), exit_status=rc, seconds=res.get('seconds'), ran_on=res.get('device'),
                                     start_and_exit_s=round(wall - res['seconds'], 2) if 'seconds' in res else None,
                                     stderr_tail=None if rc == 0 else err[-600:])
            print(f'fix {fix}: {run["fixes"][fix]}', flush=True)
            Path(a.out).write_text(json.dumps(run, indent=1))  # after every fix: a run cut short keeps what it measured
        if a.whole:
            js = Path(d) / 'all.json'
            wall, rc, err = timed([sys.executable, '-c', CLI, 'reproduce', '--device', a.device, '--json', str(js)])
            res = json.loads(js.read_text()) if js.is_file() else []
            run['whole'] = dict(wall_s=round(wall, 2), exit_status=rc, seconds={r['fix']: r['seconds'] for r in res})
            print('whole:', run['whole'], flush=True)
    probes = {'python': 'pass', 'import torch': 'import torch',
              'import the reproduce and experiment modules': 'import vllm_pd_spec.reproduce; ' +
              '; '.join(f'import vllm_pd_spec.experiments.{m}' for m in MODULES)}
    if a.device == 'cuda': probes['import torch, CUDA initialised'] = "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
    for name, code in probes.items():
        walls = [timed([sys.executable, '-c', code])[0] for _ in range(1)]
        run['startup'][name] = round(min(walls), 2)
    run['importtime_top'] = importtime('import vllm_pd_spec.reproduce; ' + '; '.join(f'import vllm_pd_spec.experiments.{m}' for m in MODULES))
    print('startup:', run['startup'], flush=True)
    for r in run['importtime_top']: print(f"  {r['cumulative_ms']:9.1f} ms cumulative {r['self_ms']:8.1f} ms self  {r['module']}")
    Path(a.out).write_text(json.dumps(run, indent=1))
    print('wrote', a.out)

if __name__ == '__main__': main()
