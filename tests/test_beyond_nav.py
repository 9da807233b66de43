"The site's nav: the start pages first, then the six fixes' pages, then the pages beyond the six, then the floors."
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tools'))
import prep_docs  # noqa: E402

NBS = sorted((Path(__file__).resolve().parents[1] / 'nbs').glob('*.ipynb'))

def test_beyond_the_six_section():
    nbs = [p.name for p in NBS if prep_docs.section(p.name) == 'Beyond the six']
    assert [prep_docs.page_stem(n) for n in nbs] == [p for s, ps in prep_docs.NAV if s == 'Beyond the six' for p in ps]
    names = prep_docs.SECTIONS
    assert names[:3] == ['If you deploy P/D with a drafter', 'The six fixes', 'Beyond the six']
    assert prep_docs.section('72_audit.ipynb') == prep_docs.section('79_explain.ipynb') == 'If you deploy P/D with a drafter'

def test_every_named_page_has_a_notebook_and_every_notebook_a_section():
    pages = {prep_docs.page_stem(p.name) for p in NBS}
    named = [p for _, ps in prep_docs.NAV for p in ps if isinstance(p, str)]
    assert len(named) == len(set(named)) and set(named) <= pages, sorted(set(named) - pages)
    assert [p.name for p in NBS if prep_docs.section(p.name) is None] == ['index.ipynb']
