"""Compare two JSON files of results field by field, ignoring wall times: keys named `seconds` (and `*_seconds`, `wall_s`,
`*_s` timings, `setting_seconds`), and print the first differences.

    python tools/same_figures.py BASELINE.json NEW.json [--max 20] [--only PATH.PREFIX]

Exit status 0 when the figures are the same, 1 when some differ. Floats are compared exactly (a figure is computed, so a
rerun of the same code on the same inputs gives the same bits); `--tol` allows a relative tolerance.
"""
import argparse, json, math, sys

TIMING = ('seconds', 'wall_s', 'wall_time', 'elapsed')

def is_timing(key)->bool:
    "A key that holds a wall time, not a figure."
    k = str(key)
    return k in TIMING or k.endswith('_seconds') or k.endswith('_wall_s') or k == 'setting_seconds'

def diff(a, b, path:str='', tol:float=0.0, out:list|None=None)->list:
    "`(path, a, b)` for every leaf where `a` and `b` differ, timing keys ignored."
    out = [] if out is None else out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(dict.fromkeys([*a, *b])):
            if is_timing(k): continue
            p = f'{path}.{k}' if path else str(k)
            if k not in a or k not in b: out.append((p, a.get(k, '<missing>'), b.get(k, '<missing>')))
            else: diff(a[k], b[k], p, tol, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b): out.append((f'{path} (length)', len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)): diff(x, y, f'{path}[{i}]', tol, out)
    elif isinstance(a, float) and isinstance(b, (int, float)) or isinstance(b, float) and isinstance(a, (int, float)):
        if not (a == b or (math.isnan(a) and math.isnan(b)) or (tol and math.isclose(a, b, rel_tol=tol))): out.append((path, a, b))
    elif a != b or type(a) is not type(b): out.append((path, a, b))
    return out

def main(argv=None)->int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('a'); ap.add_argument('b')
    ap.add_argument('--max', type=int, default=20, help='differences to print')
    ap.add_argument('--tol', type=float, default=0.0, help='relative tolerance for floats (default: exact)')
    args = ap.parse_args(argv)
    a, b = (json.load(open(f)) for f in (args.a, args.b))
    found = diff(a, b, tol=args.tol)
    for p, x, y in found[:args.max]: print(f'{p}: {str(x)[:120]} != {str(y)[:120]}')
    print(f'{len(found)} difference(s)' if found else 'same figures (timings ignored)')
    return 1 if found else 0

if __name__ == '__main__': sys.exit(main())
