"""Print vLLM's pure-Python requirements, derived from its wheel's METADATA, for a CPU-only venv.

    python tools/vllm_requirements.py vllm-0.33.0-...whl > reqs.txt
    python tools/vllm_requirements.py 0.33.0 --wheel-dir .cache/vllm-wheels   (downloads the wheel, no deps)

Keeps every `Requires-Dist` whose marker holds here (extras excluded), minus torch and its siblings
(the Makefile installs the CPU torch first) and minus the GPU kernel packages, which need CUDA or
pull a CUDA torch. With `--constraint`, prints `torch==X` for the installed torch instead, so pip
refuses any requirement that would replace the CPU build.
"""
import argparse, re, subprocess, sys, zipfile
from pathlib import Path

try: from packaging.requirements import Requirement
except ImportError: from pip._vendor.packaging.requirements import Requirement

TORCH = {'torch', 'torchvision', 'torchaudio', 'torchcodec'}
GPU = {'pynvvideocodec', 'flashinfer-python', 'flashinfer-cubin', 'flashinfer-jit-cache', 'apache-tvm-ffi',
       'tilelang', 'nvtx', 'fastsafetensors', 'instanttensor', 'quack-kernels', 'tokenspeed-mla',
       'humming-kernels', 'xformers', 'cupy-cuda12x', 'cupy-cuda13x', 'deep-gemm', 'deep-ep', 'pplx-kernels',
       'triton-kernels', 'nixl', 'b12x', 'helion', 'zentorch', 'intel-extension-for-pytorch'}
GPU_PREFIXES = ('nvidia-', 'cuda-', 'cupy', 'flashinfer')

def norm(name): return re.sub(r'[-_.]+', '-', name).lower()

def is_excluded(name):
    "True for torch's family and the GPU kernel packages."
    n = norm(name)
    return n in TORCH or n in GPU or n.startswith(GPU_PREFIXES)

def metadata(wheel):
    "The METADATA text of a wheel file."
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith('.dist-info/METADATA'))
        return z.read(name).decode()

def requirements(meta):
    "(kept, dropped) requirement strings from METADATA text, markers evaluated here, extras left out."
    kept, dropped = [], []
    for line in meta.splitlines():
        if not line.startswith('Requires-Dist:'): continue
        req = Requirement(line.split(':', 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate({'extra': ''}): continue
        req.marker = None
        (dropped if is_excluded(req.name) else kept).append(str(req))
    return kept, dropped

def fetch_wheel(version, wheel_dir):
    "Path of vllm==version's wheel in wheel_dir, downloading it (no deps) when missing."
    wheel_dir = Path(wheel_dir); wheel_dir.mkdir(parents=True, exist_ok=True)
    found = sorted(wheel_dir.glob(f'vllm-{version}-*.whl'))
    if not found:
        subprocess.run([sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '-d', str(wheel_dir),
                        f'vllm=={version}'], check=True)
        found = sorted(wheel_dir.glob(f'vllm-{version}-*.whl'))
    return found[-1]

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('wheel', help='a vllm wheel file, or a version to download')
    p.add_argument('--wheel-dir', default='.cache/vllm-wheels')
    p.add_argument('--print-wheel', action='store_true', help='print the wheel path only')
    a = p.parse_args()
    wheel = Path(a.wheel) if a.wheel.endswith('.whl') else fetch_wheel(a.wheel, a.wheel_dir)
    if a.print_wheel: print(wheel); sys.exit()
    kept, dropped = requirements(metadata(wheel))
    print(f'# {wheel.name}: {len(kept)} kept; dropped (torch family, GPU kernels): {", ".join(dropped)}')
    print('\n'.join(kept))
