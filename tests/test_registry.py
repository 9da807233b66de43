"""The registry of fixes and contracts is complete and consistent: every `Fixes` switch has an entry, every entry's
pages exist under their titles and its modules import, the audit's rows carry the registry's numbers, and the
tables keyed by a fix's number (config, reproduce, explain, the site's nav) are the registry's."""
import ast, importlib, inspect, json, re, sys
from dataclasses import fields
from pathlib import Path
import pytest
from vllm_pd_spec import registry as R
from vllm_pd_spec.config import Fixes, FIX_NAMES

ROOT = Path(__file__).resolve().parents[1]
NUMBERED = re.compile(r'^(\d+)\. ')   # how the audit's rows about an entry begin: '2. backoff: _prefill_backoff'

def test_one_numbering():
    "Numbers unique and from 1, in order; switches and names unique; an unknown number names the ones there are."
    numbers = [e.number for e in R.ENTRIES]
    assert numbers == sorted(set(numbers)) and numbers[0] == 1
    switches = [e.switch for e in R.ENTRIES if e.switch]
    assert len(set(switches)) == len(switches) and all(s.isidentifier() for s in switches)
    assert len({e.name for e in R.ENTRIES}) == len({e.audit for e in R.ENTRIES}) == len(R.ENTRIES)
    with pytest.raises(ValueError, match=r'^fix=99 is invalid: must be one of 1\.\.12$'): R.entry(99)

def test_every_fixes_switch_has_an_entry():
    "`Fixes` has exactly the registry's switches, in its order, and takes each fix's number for its switch."
    assert [f.name for f in fields(Fixes)] == list(FIX_NAMES) == [e.switch for e in R.fixes()]
    for number, switch in R.fix_switches().items():
        assert Fixes().off(number) == Fixes().off(switch) and not Fixes().off(number).is_on(switch)
    for e in R.ENTRIES:
        if not e.switch:
            with pytest.raises(ValueError): Fixes().off(e.number)   # a contract beyond the six has no switch

def _heading(nb:Path)->str:
    cells = json.loads(nb.read_text())['cells']
    return ''.join(next(c for c in cells if c['cell_type'] == 'markdown')['source']).splitlines()[0]

@pytest.mark.parametrize('e', R.ENTRIES, ids=lambda e: str(e.number))
def test_pages_exist_under_their_titles(e):
    for nb in e.pages: assert (ROOT / 'nbs' / nb).is_file(), nb
    assert _heading(ROOT / R.notebook(e.number)) == f'# {e.title}'

@pytest.mark.parametrize('e', R.ENTRIES, ids=lambda e: str(e.number))
def test_modules_import(e):
    "The contract and the experiment import; a fix's experiment has the `run` that `reproduce` calls."
    importlib.import_module(e.contract)
    run = importlib.import_module(e.experiment).run
    if e.switch: assert {'device', 'transport', 'quick', 'progress'} <= set(inspect.signature(run).parameters)

def _prefix_ok(contract:str)->bool:
    "A numbered audit row begins with its entry's `audit_prefix`, then ':' or a qualifier ('1. lookahead consumer: ...')."
    n = int(NUMBERED.match(contract).group(1))
    return any(e.number == n for e in R.ENTRIES) and re.match(re.escape(R.audit_prefix(n)) + r'[: ]', contract) is not None

def test_saved_audits_carry_the_registry_numbers():
    rows = [r['contract'] for f in sorted((ROOT / 'vllm_pd_spec' / 'data').glob('audit_*vllm_*.json')) for r in json.loads(f.read_text())]
    numbered = [c for c in rows if NUMBERED.match(c)]
    assert len(numbered) > 300 and [c for c in numbered if not _prefix_ok(c)] == []
    assert {int(NUMBERED.match(c).group(1)) for c in numbered} == {e.number for e in R.ENTRIES}   # every entry is audited

def _numbered_literals(node)->list:
    "The string constants in `node` that begin like an audit row about an entry (f-strings: their leading text)."
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.JoinedStr) and n.values and isinstance(n.values[0], ast.Constant): n = n.values[0]
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and NUMBERED.match(n.value) and ':' in n.value: out.append(n.value)
    return out

def test_audit_probes_name_rows_by_the_registry():
    "Every row name the probes write begins with the registry's prefix, and a probe's rows carry its own `fix`."
    from vllm_pd_spec.audit.harness import registered_probes
    found = [s for p in sorted((ROOT / 'vllm_pd_spec' / 'audit').glob('probes*.py')) for s in _numbered_literals(ast.parse(p.read_text()))]
    assert len(found) > 40 and [s for s in found if not _prefix_ok(s)] == []
    probes = registered_probes()
    assert {p.fix for p in probes} - {None} == {e.number for e in R.ENTRIES}
    for p in probes:
        own = {int(NUMBERED.match(s).group(1)) for s in _numbered_literals(ast.parse(inspect.getsource(p)))}
        assert own <= {p.fix}, (p.__name__, p.fix, own)

def test_tables_are_the_registrys():
    "The tables keyed by a fix's number are derived from the registry, under the names their readers use."
    from vllm_pd_spec import reproduce, explain
    assert reproduce.EXPERIMENTS == R.experiments() and reproduce.DEFAULT_LABELS == R.default_labels()
    assert reproduce.FIX_PAGES == R.fix_pages() and reproduce.SEED_DIRECTION == R.seed_directions()
    assert explain.PAGES.items() >= R.page_titles().items()
    assert all(nb == R.notebook(fix) for fix, nb, _ in explain.HAZARDS.values())
    rows = [r for rule, _ in explain.GOVERNING.values() if not isinstance(rule, str)
            for rs in (rule.values() if isinstance(rule, dict) else [rule]) for r in rs]
    assert len(rows) > 20 and all(NUMBERED.match(r) and _prefix_ok(r) for r in rows)

def test_the_sites_nav_is_the_registrys():
    sys.path.insert(0, str(ROOT / 'tools'))
    import prep_docs
    fixes, beyond = R.nav_pages()
    nav = dict(prep_docs.NAV)
    assert nav['The six fixes'][1:] == prep_docs.FIXES == [prep_docs.page_stem(nb) for nb in fixes]
    assert nav['Beyond the six'] == [prep_docs.page_stem(nb) for nb in beyond]
