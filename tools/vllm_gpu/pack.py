"""Build what the GPU machine needs, here on the CPU machine: wheels, one slim site folder, chunks that fit a call.

    python tools/vllm_gpu/pack.py fetch            # the 21 small wheels, nixl and nixl-cu13 (pip download, once)
    python tools/vllm_gpu/pack.py pack             # slim site tarball from the vLLM 0.25.0 wheel + those, split
                                                   # (the wheel from .cache/vllm-wheels, or VLLM_WHEEL_DIR)
    python tools/vllm_gpu/pack.py prompts          # the prompts (the project's held-out text, byte ids)
    python tools/vllm_gpu/pack.py stage DEST       # DEST/c00.. one chunk each; DEST/run the last chunk and the scripts
    python tools/vllm_gpu/pack.py save FROM CALLS  # merge a run's $OUT folder FROM into nbs/runs/vllm_itself_h200 as a
                                                   # new attempt (CALLS: a JSON file of the calls, as session.json keeps them)

Everything lands in .cache/vllm-gpu/ (ignored). The site folder is the wheels unzipped into one folder (what
`pip install --target` makes), minus files no run here loads: FlashAttention 2's kernels (FA3 is kept: vLLM imports
it), the Rust frontend binary, NIXL's expert-parallel build, its headers and scripts, and the NIXL plugins other than
UCX and POSIX with the libraries only they need.
"""
import hashlib, json, os, re, shutil, subprocess, sys, tarfile, zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / '.cache' / 'vllm-gpu'
WHEELS = CACHE / 'wheels'
SITE = CACHE / 'site'
PARTS = CACHE / 'parts'
VLLM_WHEELS = [Path(os.environ['VLLM_WHEEL_DIR'])] if os.environ.get('VLLM_WHEEL_DIR') else [ROOT / '.cache' / 'vllm-wheels']
VERSION = '0.25.0'
EXTRA = ['nixl==1.5.1', 'nixl-cu13==1.5.1']
CHUNK = 24 * 2**20
PLATFORMS = ['manylinux_2_28_x86_64', 'manylinux_2_31_x86_64', 'manylinux_2_27_x86_64', 'manylinux_2_26_x86_64',
             'manylinux_2_24_x86_64', 'manylinux_2_17_x86_64', 'manylinux2014_x86_64', 'manylinux1_x86_64', 'any']
DROP = [  # paths in the site folder no run here loads (FlashAttention 3 stays: vllm_flash_attn refuses to import without
    # FA2 or FA3, and the H200 takes FA3; the runs themselves use vLLM's Triton attention, FA has no float32)
    'vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so', 'vllm/vllm-rs', 'nixl_ep_cu13', 'nixl_ep', 'nixl_cu13-1.5.1.data',
    'nixl_cu13.scripts']
NIXL_ROOTS = ('_bindings', '_utils', 'libplugin_UCX', 'libplugin_POSIX')  # NIXL's Python bindings and the two plugins

def requirements()->list:
    "The pinned wheels seen working for vLLM 0.25.0 on an H200 (this folder's wheels.txt), vLLM itself excluded."
    lines = (Path(__file__).parent / 'wheels.txt').read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.startswith('#') and not l.startswith('vllm==')] + EXTRA

def fetch():
    "pip download the wheels (no dependencies: the list is complete) into .cache/vllm-gpu/wheels."
    WHEELS.mkdir(parents=True, exist_ok=True)
    plat = [a for p in PLATFORMS for a in ('--platform', p)]
    subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-deps', '--only-binary=:all:', '--python-version', '3.12',
                    '--implementation', 'cp', *plat, '-d', str(WHEELS), *requirements()], check=True)

def vllm_wheel()->Path:
    for d in VLLM_WHEELS:
        if found := sorted(d.glob(f'vllm-{VERSION}-*.whl')): return found[0]
    raise SystemExit(f'no vllm-{VERSION} wheel in {", ".join(map(str, VLLM_WHEELS))}')

def _needed(path:Path)->list:
    out = subprocess.run(['readelf', '-d', str(path)], capture_output=True, text=True).stdout
    return re.findall(r'\(NEEDED\).*\[(.*)\]', out)

def prune_nixl(site:Path)->int:
    "Delete NIXL's shared libraries that neither its bindings, UCX with its transports, nor the POSIX plugin need."
    libs = {}
    for root in ('nixl_cu13.libs', '.nixl_cu13.mesonpy.libs', 'nixl_cu13'):
        for p in (site / root).rglob('*.so*'): libs.setdefault(p.name, []).append(p)
    keep, stack = set(), [p for n, ps in libs.items() for p in ps
                          if n.startswith(NIXL_ROOTS) or ('/ucx/' in str(p) and 'perftest' not in n)]
    while stack:
        p = stack.pop()
        if p in keep: continue
        keep.add(p)
        stack += [q for n in _needed(p) for q in libs.get(n, [])]
    gone = [p for ps in libs.values() for p in ps if p not in keep]
    for p in gone: p.unlink()
    return len(gone)

def pack():
    "Unzip the wheels into one site folder, drop what no run loads, tar.xz it, split it; write the manifest."
    if SITE.exists(): shutil.rmtree(SITE)
    SITE.mkdir(parents=True)
    wheels = [vllm_wheel()] + sorted(WHEELS.glob('*.whl'))
    for w in wheels: zipfile.ZipFile(w).extractall(SITE)
    for d in DROP:
        p = SITE / d
        if p.is_dir(): shutil.rmtree(p)
        elif p.exists(): p.unlink()
    pruned = prune_nixl(SITE)
    PARTS.mkdir(parents=True, exist_ok=True)
    for old in PARTS.glob('site.tar.xz.*'): old.unlink()
    tar = CACHE / 'site.tar.xz'
    subprocess.run(f'tar -C {SITE} -cf - . | xz -T2 -6 > {tar}', shell=True, check=True)
    data = tar.read_bytes()
    parts = []
    for i in range(0, len(data), CHUNK):
        part = PARTS / f'site.tar.xz.{i // CHUNK:02d}'
        part.write_bytes(data[i:i + CHUNK])
        parts.append(dict(name=part.name, bytes=part.stat().st_size, sha256=hashlib.sha256(part.read_bytes()).hexdigest()))
    manifest = dict(vllm=VERSION, vllm_wheel=vllm_wheel().name, wheels=[w.name for w in wheels], dropped=DROP,
                    nixl_libraries_pruned=pruned, tar_bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), parts=parts)
    (CACHE / 'manifest.json').write_text(json.dumps(manifest, indent=1))
    print(json.dumps(dict(tar_bytes=len(data), parts=len(parts), sha256=manifest['sha256'])))

def prompts():
    "The prompts both engines get: held-out CPython source as byte ids (the project's text-hybrid prompts)."
    sys.path.insert(0, str(ROOT))
    from vllm_pd_spec.model.drafters import model_prompts
    p = model_prompts('text-hybrid', 20, prompt_len=64)
    long_text = [t for q in model_prompts('text-hybrid', 4, prompt_len=2048) for t in q]
    out = dict(source="vllm_pd_spec.model.drafters.model_prompts('text-hybrid', n, prompt_len): held-out CPython source, byte ids",
               pd_prompts=p[:16], background=p[16:], long_text=long_text)
    (CACHE / 'prompts.json').write_text(json.dumps(out))
    print(len(out['pd_prompts']), len(out['background']), len(long_text))

SCRIPTS = ('device.sh', 'ckpt.py', 'ablations.py', 'experiments.py')

def stage(dest:Path):
    "DEST/cNN: one chunk each (every chunk but the last); DEST/run: the last chunk, the manifest, the prompts, the scripts."
    manifest = json.loads((CACHE / 'manifest.json').read_text())
    if dest.exists(): shutil.rmtree(dest)
    parts = manifest['parts']
    for i, part in enumerate(parts):
        d = dest / ('run' if i == len(parts) - 1 else f'c{i:02d}')
        d.mkdir(parents=True)
        shutil.copy(PARTS / part['name'], d)
    for f in (CACHE / 'manifest.json', CACHE / 'prompts.json', *(Path(__file__).parent / s for s in SCRIPTS)):
        shutil.copy(f, dest / 'run')
    for d in sorted(dest.iterdir()): print(d.name, sum(f.stat().st_size for f in d.iterdir()))

SAVED = ROOT / 'nbs' / 'runs' / 'vllm_itself_h200'

def save(src:Path, calls_file:Path, setup:str):
    "Merge the jobs in SRC (each job's JSON and log) into the saved run as a new attempt; jobs not run keep their result."
    session, merged = json.loads((SAVED / 'session.json').read_text()), json.loads((SAVED / 'vllm_itself.json').read_text())
    jobs = sorted(f.stem for f in src.glob('*.json') if f.stem not in ('env', 'ckpt', 'vllm_itself'))
    if not jobs: raise SystemExit(f'{src} holds no job JSON')
    attempt = max(a['attempt'] for a in session['attempts']) + 1
    merged.setdefault('from_attempt', {n: attempt - 1 for n in merged['results']})
    took = re.search(r'"seconds": ([0-9.]+)', (src / 'device.log').read_text())
    part = dict(seconds=float(took.group(1)) if took else None, status={}, results={})
    for n in jobs:
        res = json.loads((src / f'{n}.json').read_text())
        merged['results'][n] = part['results'][n] = res
        merged['status'][n] = part['status'][n] = 'exit 0' if 'error' not in res else 'error'
        merged['from_attempt'][n] = attempt
    sys.path.insert(0, str(Path(__file__).parent))
    from experiments import summary
    session['attempts'].append(dict(attempt=attempt, setup=setup, jobs=jobs, summary=summary(part)))
    prev = session['calls'][-1]['held_s']
    for c in json.loads(calls_file.read_text()):
        session['calls'].append(dict(c, call=len(session['calls']) + 1, held_s=round(prev + c['held_s'], 1)))
    session['device_seconds'] = session['calls'][-1]['held_s']
    session['saved_run'] = f"attempts {sorted(set(merged['from_attempt'].values()))} (per job: from_attempt)"
    logs = (SAVED / 'logs.txt').read_text().split('\n===== ')
    keep = [x for x in logs if x and x.lstrip('= ').split(' ')[0].split('.')[0] not in jobs]
    new = (src / 'logs.txt').read_text() if (src / 'logs.txt').exists() else ''
    (SAVED / 'logs.txt').write_text('\n===== '.join(keep).rstrip('\n') + '\n' + new)
    for f in ('env.json', 'ckpt.json'):
        if (src / f).exists(): shutil.copy(src / f, SAVED / f)
    shutil.copy(src / 'device.log', SAVED / f'device_attempt{attempt}.log')
    for name, obj in (('session.json', session), ('vllm_itself.json', merged)):
        (SAVED / name).write_text(json.dumps(obj, indent=1) + '\n')
    print(f'attempt {attempt}: {jobs} saved into {SAVED}')

if __name__ == '__main__':
    cmd = sys.argv[1] if len(sys.argv) > 1 else ''
    if cmd == 'fetch': fetch()
    elif cmd == 'pack': pack()
    elif cmd == 'prompts': prompts()
    elif cmd == 'stage': stage(Path(sys.argv[2]))
    elif cmd == 'save': save(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
    else: raise SystemExit(__doc__)
