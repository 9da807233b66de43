"""House rules for notebooks that a reviewer would otherwise have to remember.

The docs build (nbdev-proc-nbs) executes every cell that holds an import statement, whatever its test
flags, so a `#| gpu` or `#| slow` cell with an import would run CUDA code or a long job while building
the site on a CPU machine."""
import ast, json, re
from pathlib import Path
import pytest

NBS = sorted((Path(__file__).resolve().parents[1]/'nbs').glob('*.ipynb'))
FLAG = re.compile(r'^\s*#\|\s*(gpu|slow)\s*$', re.M)

def code_cells(nb):
    for c in json.loads(nb.read_text())['cells']:
        if c['cell_type'] == 'code': yield ''.join(c['source'])

def has_import(src):
    body = '\n'.join(l for l in src.splitlines() if not l.lstrip().startswith(('#|', '%', '!')))
    try: tree = ast.parse(body)
    except SyntaxError: return False
    return any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree))

@pytest.mark.parametrize('nb', NBS, ids=lambda p: p.name)
def test_gpu_and_slow_cells_hold_no_import(nb):
    bad = [src.splitlines()[:3] for src in code_cells(nb) if FLAG.search(src) and has_import(src)]
    assert bad == [], f'{nb.name}: move the imports of these cells into an ordinary cell above them: {bad}'

@pytest.mark.parametrize('nb', NBS, ids=lambda p: p.name)
def test_title_cell_first(nb):
    first = json.loads(nb.read_text())['cells'][0]
    assert first['cell_type'] == 'markdown' and ''.join(first['source']).startswith('# '), f'{nb.name}: first cell must be "# Title"'

def mixes_imports(src):
    "True when a non-exported cell holds imports and other statements (the docs build would run all of it)."
    if re.search(r'^\s*#\|\s*exports?\b', src, re.M): return False
    body = '\n'.join(l for l in src.splitlines() if not l.lstrip().startswith(('#|', '%', '!')))
    try: tree = ast.parse(body)
    except SyntaxError: return False
    kinds = {isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body}
    return kinds == {True, False}

@pytest.mark.parametrize('nb', NBS, ids=lambda p: p.name)
def test_imports_in_cells_of_their_own(nb):
    "The docs build executes every cell with an import; keep those cells to imports, so it reruns no experiment."
    bad = [src.splitlines()[:2] for src in code_cells(nb) if mixes_imports(src)]
    assert bad == [], f'{nb.name}: split the imports of these cells into a cell of their own: {bad}'

# ---- content rules the site depends on (known offenders wait in tests/content_offenders.json) ----
import base64, struct, sys
sys.path.insert(0, str(Path(__file__).resolve().parents[1]/'tools'))
import house_rules, prep_docs  # noqa: E402

def test_notebooks_name_nothing_outside_the_project():
    "The project speaks of itself only: see `house_rules.OUTSIDE_NAMES` for the patterns."
    found = {nb.name: names for nb in NBS if (names := house_rules.outside_names(*house_rules.notebook_text(nb)))}
    msg = house_rules.verdict('outside_names_notebooks', found)
    assert not msg, msg

def _images(nb):
    "(cell id, png width or None, has alt text) for every image output of `nb`."
    for c in json.loads(nb.read_text())['cells']:
        d = prep_docs.split_directives(''.join(c.get('source', '')))[0] if c['cell_type'] == 'code' else {}
        for o in c.get('outputs', []):
            data, meta = o.get('data', {}), o.get('metadata', {})
            for mime in ('image/png', 'image/svg+xml'):
                if mime not in data: continue
                w = struct.unpack('>I', base64.b64decode(''.join(data[mime])[:64])[16:20])[0] if mime == 'image/png' else None
                plain = ''.join(data.get('text/plain', ''))
                alt = d.get('fig-alt') or (meta.get(mime) or {}).get('alt') or (plain.strip() and not plain.startswith('<'))
                yield c.get('id'), w, bool(alt)

def test_plots_at_page_resolution():
    "PNG plots at most twice the column's width (`vllm_pd_spec.plotting.figure` + `show` make 1,140 px)."
    found = {nb.name: [f'cell {cid}: {w} px' for cid, w, _ in imgs if w and w > prep_docs.MAX_IMG_PX]
             for nb in NBS for imgs in [list(_images(nb))]}
    msg = house_rules.verdict('wide_plots', {k: v for k, v in found.items() if v})
    assert not msg, msg

def test_plots_have_alt_text():
    "Every image says what it shows: `show(fig, alt=...)`, or `#| fig-alt: ...` on the cell."
    found = {nb.name: [f'cell {cid}' for cid, _, alt in imgs if not alt] for nb in NBS for imgs in [list(_images(nb))]}
    msg = house_rules.verdict('plots_without_alt', {k: v for k, v in found.items() if v})
    assert not msg, msg

def test_no_saved_plot_breaks_a_plot_rule():
    "A page's plots keep the site's rules (`vllm_pd_spec.plotting.layout_problems`): `show` warns, and the warning is in the saved output."
    found = {nb.name: [f"cell {c.get('id')}" for c in json.loads(nb.read_text())['cells'] for o in c.get('outputs', [])
                       if 'PlotLayoutWarning' in ''.join(o.get('text', ''))] for nb in NBS}
    msg = house_rules.verdict('plot_rule_warnings', {k: v for k, v in found.items() if v})
    assert not msg, msg
