"""Which experiment figures move with the same-step GDN prefix-hit fix: each experiment that runs text-hybrid, with the
fix (a GDN hit on a state published in the same step waits for the next step, as vLLM 0.34.0 does) and without it (the
hit is taken at once and the request starts from a state that does not exist yet), compared figure by figure.

    PYTHONPATH=. python3 tools/same_step_rerun.py [--full] [--only rows,guard] [--jobs 2] [--out /tmp/same-step]

Each experiment runs in a process of its own, one torch thread each, `--jobs` at a time: its default run, and with `--full`
the full run its saved page shows. Writes `NAME.fixed.json` and `NAME.unfixed.json` under `--out` and prints, per
experiment, how many GDN prefix hits fell on a state published in the same step (none: no figure can move), the differences (timings ignored, as `tools/same_figures.py` compares). Saves nothing under nbs/.
"""
import argparse, json, os, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

EXPERIMENTS = ('backoff', 'rows', 'guard', 'draft_groups', 'state_slots', 'connector_lookup')  # the ones that run text-hybrid

CHILD = r'''
import json, sys, torch
torch.set_num_threads(1)
name, full, fixed, out = sys.argv[1], sys.argv[2] == '1', sys.argv[3] == '1', sys.argv[4]
from vllm_pd_spec.engine import kv_cache_manager as K
waits = [0]  # same-step hits that waited (with the fix) or were taken at once (without): none, and no figure can move
def counted(self, request_id, num_tokens, new_computed_blocks, **kw):
    same = bool(new_computed_blocks) and new_computed_blocks[-1].block_hash in self.cached_blocks_this_step
    waits[0] += same
    if not fixed and same: return K.SingleTypeKVCacheManager.get_num_blocks_to_allocate(self, request_id, num_tokens, new_computed_blocks, **kw)
    return fixed_rule(self, request_id, num_tokens, new_computed_blocks, **kw)
fixed_rule, K.MambaManager.get_num_blocks_to_allocate = K.MambaManager.get_num_blocks_to_allocate, counted
import importlib
run = importlib.import_module(f'vllm_pd_spec.experiments.{name}').run
r = run(full=True) if full else run()
r = r.to_json() if hasattr(r, 'to_json') else r
open(out, 'w').write(json.dumps(r, indent=1, default=str) + '\n')
open(out + '.waits', 'w').write(f'{waits[0]}\n')
'''

def one(name:str, full:bool, fixed:bool, out:Path)->tuple:
    "Run one experiment in a fresh process; `(seconds, exit status, stderr tail)`."
    t = time.perf_counter()
    p = subprocess.run([sys.executable, '-c', CHILD, name, str(int(full)), str(int(fixed)), str(out)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get('PYTHONPATH', '')])))
    return time.perf_counter() - t, p.returncode, p.stderr[-2000:]

def main(argv=None)->int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--full', action='store_true', help='the full runs (minutes to hours on CPU) instead of the default ones')
    ap.add_argument('--only', default=','.join(EXPERIMENTS), help='comma-separated experiments (default: all six)')
    ap.add_argument('--jobs', type=int, default=2, help='processes at a time')
    ap.add_argument('--out', default='/tmp/same-step', help='where the JSON results go')
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from same_figures import diff
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.only.split(',') if n]
    jobs = [(n, fixed) for n in names for fixed in (True, False)]
    path = lambda n, fixed: out / f"{n}{'.full' if args.full else ''}.{'fixed' if fixed else 'unfixed'}.json"
    with ThreadPoolExecutor(args.jobs) as ex:
        done = dict(zip(jobs, ex.map(lambda j: one(j[0], args.full, j[1], path(*j)), jobs)))
    moved = 0
    for n in names:
        (ta, ra, ea), (tb, rb, eb) = done[(n, True)], done[(n, False)]
        if ra or rb: print(f'{n}: failed (exit {ra}, {rb})\n{ea or eb}'); moved += 1; continue
        d = diff(json.loads(path(n, False).read_text()), json.loads(path(n, True).read_text()))
        hits = [Path(f'{path(n, f)}.waits').read_text().strip() for f in (True, False)]
        print(f"{n}{' (full)' if args.full else ''}: {'the same figures' if not d else f'{len(d)} figure(s) move'} "
              f'(fixed {ta:.0f} s, unfixed {tb:.0f} s; same-step GDN hits: {hits[0]} waited with the fix, {hits[1]} taken without)')
        for p, a, b in d[:12]: print(f'  {p}: {str(a)[:100]} -> {str(b)[:100]}')
        moved += bool(d)
    return 1 if moved else 0

if __name__ == '__main__': sys.exit(main())
