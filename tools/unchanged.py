"""Run a command and fail if it changed any file git sees under the given paths.

    python tools/unchanged.py PATHS -- COMMAND ...     (PATHS: comma-separated, e.g. vllm_pd_spec,nbs)

Tracked and untracked-but-not-ignored files count, so the check works on a clean clone (CI) and in a
work tree with uncommitted changes alike: it compares the tree before and after the command.
"""
import hashlib, subprocess, sys
from pathlib import Path

def snapshot(paths):
    "{path: content hash} for every file git sees under `paths`."
    out = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard', '--', *paths],
                         capture_output=True, text=True, check=True).stdout.split()
    return {p: hashlib.sha1(Path(p).read_bytes()).hexdigest() if Path(p).exists() else None for p in out}

if __name__ == '__main__':
    if '--' not in sys.argv: sys.exit(__doc__)
    i = sys.argv.index('--')
    paths, cmd = sys.argv[1].split(','), sys.argv[i+1:]
    before = snapshot(paths)
    rc = subprocess.run(cmd).returncode
    if rc: sys.exit(rc)
    after = snapshot(paths)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if changed:
        print(f"`{' '.join(cmd)}` changed {len(changed)} file(s): {', '.join(changed)}", file=sys.stderr)
        print("Run it, review and commit the result.", file=sys.stderr)
        sys.exit(1)
    print(f"`{' '.join(cmd)}`: no change")
