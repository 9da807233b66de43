"""The notebooks read in order: no notebook imports a module whose notebook comes later.

The order is the file names' (as `ls nbs` and nbdev list them); the floors are config and contracts (0x), model
(1x), kernels (2x), engine (3x), the experiments' kit (4x), experiments (5x, 6x), audit, plugin and explain (7x),
the CLI (8x), and the reader's pages without a module (9x) (tools/renumber.py holds the mapping). A notebook's
module is its `#| default_exp`; its imports are every `import vllm_pd_spec...` / `from vllm_pd_spec... import`
in any code cell, exported or not.

The rule:
- An exported cell never imports a module whose notebook comes later: the package's own order. No exception.
- A non-exported cell neither, with two named exceptions:
  1. The reader's pages: a fix's page (and each page beyond the six) is at once a contract's home, which the
     engine imports, so it keeps its early number, and the page the site shows first for that fix, whose
     "In short" head and results sections show the experiment's measured result (the experiment, its kit,
     explain, reproduce, the CLI). Those pages are the site's `NAV` sections 'The six fixes' and 'Beyond the
     six' (tools/prep_docs.py): in non-exported cells they may import any later module.
  2. `LOOKS_AHEAD`: a few cells elsewhere that show the module at work with a later one (a trained model, the
     CLI, a table renderer), each named with its reason. An entry that no longer looks ahead fails the test.
"""
import ast, json, re, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import prep_docs  # noqa: E402

NBS = sorted((ROOT/'nbs').glob('*.ipynb'))
PKG = 'vllm_pd_spec'

LOOKS_AHEAD = {  # page (notebook name without number) -> {later module it may import in a non-exported cell: why}
    'gated_delta_rule': {'model.drafters': "the shipped models' GDN layers, checked against the reference",
                         'model.train_text': 'the saved training runs'},
    'task': {'model.drafters': 'a shipped model on the task', 'engine.llm_engine': 'the task served by the engine'},
    'model': {'model.drafters': 'a shipped model loaded to show the forward pass'},
    'kernel_bench': {'cli': 'the `kernel-bench` command'},
    'explain': {'cli': 'the `explain` command'},
    'engine_spec_decode': {'engine.runner': 'the speculators at work in the model runner that builds them from its config'},
    'engine_cudagraph': {'engine.runner': 'the graph manager at work in the model runner that builds it from its config'},
}

def reader_pages():
    "The pages of the site's 'The six fixes' and 'Beyond the six' sections."
    return {p for s, pages in prep_docs.NAV if s in ('The six fixes', 'Beyond the six') for p in pages}

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
    readers, bad = reader_pages(), {}
    for nb, es in graph().items():
        page = prep_docs.page_stem(nb)
        if page in readers: continue
        ok = LOOKS_AHEAD.get(page, {})
        later = sorted(f'{m} ({home})' for home, m, exported in es if exported or m not in ok)
        if later: bad[nb] = later
    assert bad == {}, f'notebooks that import a module whose notebook comes later: {bad}'

def test_looks_ahead_entries_are_current():
    "Each allowance still names a later module that its notebook imports (else remove it): the list cannot rot."
    found = {(prep_docs.page_stem(nb), m) for nb, es in graph().items() for _, m, _ in es}
    stale = sorted((p, m) for p, ms in LOOKS_AHEAD.items() for m in ms if (p, m) not in found)
    assert stale == [], f'LOOKS_AHEAD entries that no longer look ahead: {stale}'
    pages = {prep_docs.page_stem(nb.name) for nb in NBS}
    assert reader_pages() <= pages, f'reader pages without a notebook: {sorted(reader_pages() - pages)}'
