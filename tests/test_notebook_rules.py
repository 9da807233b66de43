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
