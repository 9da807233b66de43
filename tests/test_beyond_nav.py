"The site's nav: the pages beyond the six fixes form their own section, right after the six."
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tools'))
import prep_docs  # noqa: E402

def test_beyond_the_six_section():
    nbs = sorted(p.name for p in (Path(__file__).resolve().parents[1] / 'nbs').glob('09*.ipynb'))
    assert nbs and {prep_docs.section(n) for n in nbs} == {'Beyond the six'}
    names = [s for s, _ in prep_docs.SECTIONS]
    assert names.index('Beyond the six') == names.index('The six fixes') + 1
    assert prep_docs.section('07_audit.ipynb') == prep_docs.section('08_explain.ipynb') == 'Tools'
