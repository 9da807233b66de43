"""Fetch the site's two browser libraries from the npm registry with npm itself, check them, unpack them.

    python tools/vendor.py [DEST]        # default .cache/vendor

KaTeX typesets the pages' math when the site is built (tools/mkdocs_hooks.py runs it under node), and its
stylesheet and fonts ship with the site; Mermaid draws the diagrams to SVG when the site is built
(tools/prep_docs.py runs it in headless Chromium) and does not ship. Nothing is fetched when a page is viewed. Each package is pinned by version and by the sha512
integrity the registry publishes, so a changed tarball stops the build."""
import base64, hashlib, json, shutil, subprocess, sys, tarfile, tempfile
from pathlib import Path

PINS = {  # package@version: (sha512 integrity, files to keep from the tarball's `package/` folder)
    'katex@0.19.1': ('sha512-jG8uKntjSEcm2EpQOh0XturpPuuC9r3Sq5HLHdsFdWZT27E672SF19QEi+of0/YeOy15lDgRhKvr5614uRrEfA==',
                     ['dist/katex.min.js', 'dist/katex.min.css', 'dist/fonts/*.woff2', 'LICENSE']),
    'mermaid@11.17.2': ('sha512-V6K3C8EBdEsPFZXSKMJe6ppQOENxuHARr9GvHX4hh47lAbhMRD9qf4oEK7LoaRQxULMa80/qt5gHO73aCleBBg==',
                        ['dist/mermaid.min.js', 'LICENSE']),
}

def integrity(path):
    "npm's `sha512-<base64>` integrity string of a file."
    return 'sha512-' + base64.b64encode(hashlib.sha512(Path(path).read_bytes()).digest()).decode()

def unpack(tgz, dest, patterns):
    "Extract the members of `tgz` under `package/` that match `patterns` into `dest`, flattening `dist/`."
    with tarfile.open(tgz) as tf:
        for m in tf.getmembers():
            rel = Path(m.name).relative_to('package')
            if m.isfile() and any(rel.match(p) for p in patterns):
                out = dest/Path(*[p for p in rel.parts if p != 'dist'])
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(tf.extractfile(m).read())

def vendor(dest='.cache/vendor'):
    "Unpack every pinned package into `dest/<name>/` (skipped when its stamp is there); returns `dest`."
    dest = Path(dest)
    for spec, (sri, patterns) in PINS.items():
        name = spec.split('@')[0]
        stamp = dest/name/f'.{spec}'
        if stamp.exists(): continue
        if not shutil.which('npm'): sys.exit('npm is needed to fetch the site libraries (`make vendor` installs it)')
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run(['npm', 'pack', spec, '--json', '--pack-destination', tmp], capture_output=True,
                                 text=True, check=True).stdout
            tgz = Path(tmp)/json.loads(out)[0]['filename']
            if integrity(tgz) != sri: sys.exit(f'{spec}: integrity {integrity(tgz)} is not the pinned {sri}')
            shutil.rmtree(dest/name, ignore_errors=True)
            unpack(tgz, dest/name, patterns)
        stamp.touch()
    return dest

if __name__ == '__main__':
    print(vendor(*sys.argv[1:2]))
