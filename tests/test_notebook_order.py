"""The notebooks read in order: no notebook imports a module whose notebook comes later.

The order is the file names' (as `ls nbs` and nbdev list them); the floors are config and contracts (0x), model
(1x), kernels (2x), engine (3x), the experiments' kit (4x), experiments (5x, 6x), audit, plugin and explain (7x),
the CLI (8x), and the reader's pages without a module (9x) (tools/renumber.py holds the mapping). A notebook's
module is its `#| default_exp`; its imports are every `import vllm_pd_spec...` / `from vllm_pd_spec... import`
in any code cell, exported or not.

The rule, without exceptions: no cell imports a module whose notebook comes later, exported or not. A fix's contract
page (0x) holds its contract, examples and checks; the page a reader reads for the fix (the "In short" box, the
experiment's results, what upstream does today) is a reader's page on the 9x floor, which may import anything before it.
"""
import ast, json, re, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import prep_docs  # noqa: E402

NBS = sorted((ROOT/'nbs').glob('*.ipynb'))
PKG = 'vllm_pd_spec'

def _cells(nb):
    for c in json.loads(nb.read_text())['cells']:
        if c['cell_type'] == 'code': yield ''.join(c['source'])

def default_exp(nb):
    "The module `nb` exports to (`vllm_pd_spec.x.y`), or None."
    for src in _cells(nb):
        m = re.search(r'^#\|\s*default_exp\s+(\S+)', src, re.M)
        if m: return f'{PKG}.{m.group(1)}'

def cell_imports(src, module=None):
    "Modules (and `module.name` candidates) of `vllm_pd_spec` that a cell's source imports."
    body = '\n'.join(l for l in src.splitlines() if not l.lstrip().startswith(('#|', '%', '!')))
    try: tree = ast.parse(body)
    except SyntaxError: return set()
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import): out |= {a.name for a in n.names if a.name.startswith(PKG)}
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ''
            if n.level:  # relative to the notebook's module
                parent = (module or PKG).split('.')[:-n.level] or [PKG]
                base = '.'.join(parent + ([base] if base else []))
            if base.split('.')[0] != PKG: continue
            out |= {base} | {f'{base}.{a.name}' for a in n.names}
    return out

def graph():
    "{notebook name: [(later notebook, module, exported)]}: the imports of a module whose notebook comes later."
    homes = {m: nb.name for nb in NBS if (m := default_exp(nb))}
    pos = {nb.name: i for i, nb in enumerate(NBS)}
    out = {}
    for nb in NBS:
        mod = default_exp(nb)
        for src in _cells(nb):
            exported = bool(re.search(r'^#\|\s*export', src, re.M))
            for m in cell_imports(src, mod):
                home = homes.get(m)
                if home and home != nb.name and pos[home] > pos[nb.name]:
                    out.setdefault(nb.name, set()).add((home, m[len(PKG) + 1:], exported))
    return out

def test_the_import_graph_is_read():
    "The graph sees what it should: modules by their home, relative and parenthesised imports."
    assert default_exp(ROOT/'nbs'/'00_config.ipynb') == 'vllm_pd_spec.config'
    assert cell_imports('#| export\nfrom vllm_pd_spec.contracts import (lookahead,\n  backoff)') >= \
        {'vllm_pd_spec.contracts.lookahead', 'vllm_pd_spec.contracts.backoff'}
    assert cell_imports('from . import __version__', 'vllm_pd_spec.cli') == {'vllm_pd_spec', 'vllm_pd_spec.__version__'}
    assert cell_imports('def f():\n    import vllm_pd_spec.engine.request as r') == {'vllm_pd_spec.engine.request'}
    assert cell_imports('%timeit x\nimport torch') == set()

def test_no_exported_cell_imports_a_later_notebook():
    bad = {nb: sorted(e[:2] for e in es if e[2]) for nb, es in graph().items() if any(e[2] for e in es)}
    assert bad == {}, f'exported cells that import a module whose notebook comes later (renumber, see tools/renumber.py): {bad}'

def test_no_notebook_imports_a_later_notebook():
    bad = {nb: sorted(f'{m} ({home})' for home, m, _ in es) for nb, es in graph().items()}
    assert bad == {}, f'notebooks that import a module whose notebook comes later (move the cell to a later page): {bad}'

def test_the_nav_lists_readers_pages():
    "The site's 'The six fixes' and 'Beyond the six' sections list pages on the reader's floor (9x), never a contract's page."
    readers = {p for s, pages in prep_docs.NAV if s in ('The six fixes', 'Beyond the six') for p in pages}
    floors = {prep_docs.page_stem(nb.name): nb.name[0] for nb in NBS}
    assert readers <= set(floors), f'reader pages without a notebook: {sorted(readers - set(floors))}'
    assert {p: floors[p] for p in readers if floors[p] != '9'} == {}
