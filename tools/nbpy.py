"""Round-trip notebooks through jupytext-style "percent" scripts, for authoring in a text editor.

    python tools/nbpy.py to-nb  SRC.py  nbs/NAME.ipynb   # write a notebook (no outputs) from a script
    python tools/nbpy.py to-py  nbs/NAME.ipynb  OUT.py   # write the script back out of a notebook

`nbs/*.ipynb` stays the source of truth: scripts are scratch, never committed. After `to-nb`, run
`nbdev-test --save PATH` (add `--flags "gpu slow"` on a GPU machine) to execute and keep outputs, then
`nbdev-clean`.
"""
import hashlib, json, re, sys
from pathlib import Path

_MARK = re.compile(r'^# %%(?:\s*\[(markdown|md)\])?\s*$')

def py2cells(text):
    "Split a percent script into notebook cells."
    cells, kind, buf = [], None, []
    def flush():
        if kind is None: return
        lines = list(buf)
        while lines and not lines[-1].strip(): lines.pop()
        while lines and not lines[0].strip(): lines.pop(0)
        if kind == 'markdown': lines = [l[2:] if l.startswith('# ') else l.lstrip('#') for l in lines]
        src = '\n'.join(lines)
        cell = dict(cell_type=kind, metadata={}, source=src)
        if kind == 'code': cell.update(execution_count=None, outputs=[])
        cells.append(cell)
    for line in text.splitlines():
        m = _MARK.match(line)
        if m:
            flush(); kind, buf = ('markdown' if m.group(1) else 'code'), []
        elif kind is not None: buf.append(line)
    flush()
    return cells

def to_nb(src, dst):
    "Write notebook `dst` from percent script `src`."
    cells = py2cells(Path(src).read_text())
    for i, c in enumerate(cells): c['id'] = hashlib.sha1(f'{Path(dst).stem}/{i}'.encode()).hexdigest()[:8]
    nb = dict(cells=cells, nbformat=4, nbformat_minor=5,
              metadata=dict(kernelspec=dict(display_name='python3', language='python', name='python3')))
    Path(dst).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n')

def to_py(src, dst):
    "Write percent script `dst` from notebook `src`."
    out = []
    for c in json.loads(Path(src).read_text())['cells']:
        s = ''.join(c['source']) if isinstance(c['source'], list) else c['source']
        if c['cell_type'] == 'markdown':
            out += ['# %% [markdown]'] + [('# ' + l) if l else '#' for l in s.splitlines()]
        else: out += ['# %%'] + s.splitlines()
        out.append('')
    Path(dst).write_text('\n'.join(out))

if __name__ == '__main__':
    if len(sys.argv) != 4 or sys.argv[1] not in ('to-nb', 'to-py'): sys.exit(__doc__)
    (to_nb if sys.argv[1] == 'to-nb' else to_py)(sys.argv[2], sys.argv[3])
