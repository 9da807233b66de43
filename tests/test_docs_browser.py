"""The rendered site, checked as a reader sees it: served over http on 127.0.0.1, every page loaded once in one
headless Chromium at 1,280 px (driven over the DevTools protocol, tools/cdp.py), asserted on the rendered DOM and
on what the page asked the network for. `DOCS_DIR` picks the site (default: the committed `docs/`)."""
import functools, http.server, json, os, re, sys, threading
from pathlib import Path
import pytest
from nbdev.config import nbpath2html

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import cdp, check_site, prep_docs  # noqa: E402
DOCS = Path(os.environ.get('DOCS_DIR') or ROOT/'docs')
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not cdp.chromium_path(), reason='headless Chromium not installed (`make browser` installs it)'),
              pytest.mark.skipif(not (DOCS/'index.html').exists(), reason=f'no site at {DOCS} (`make docs`)')]

def page_for(nb): return nbpath2html(nb).name  # nbdev's own page name for a notebook

NOTEBOOKS = sorted((ROOT/'nbs').glob('*.ipynb'))
FIX_PAGES = [p + '.html' for s, ps in prep_docs.NAV if s == 'The six fixes' for p in ps]  # fixes 1-6, one page each
WIDTH = 1280

# What one page shows at WIDTH: its h1s; every block but source code that is wider than the content column (its
# own box past the column's right edge, or content scrolled inside it); table cells reading "None"; an "In short"
# box. Code is Python source: a highlighted block that is not a cell's output.
MEASURE = r"""(() => {
  const col = document.querySelector('.md-content__inner'), cr = col.getBoundingClientRect();
  const cs = getComputedStyle(col), right = cr.right - parseFloat(cs.paddingRight) + 1;
  const isCode = e => { const h = e.closest('.highlight'); return !!h && !h.classList.contains('nb-output') && !e.closest('.nb-output'); };
  const what = e => (e.tagName.toLowerCase() + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ')[0] : '')
                     + ': ' + (e.innerText || e.getAttribute('alt') || '').trim().slice(0, 60).replace(/\s+/g, ' '));
  const wide = [];
  for (const e of col.querySelectorAll('table, pre, pre > code, .nb-html, img, svg, .katex-display, .md-typeset__scrollwrap, .diagram, .admonition, details')) {
    if (isCode(e) || e.closest('.md-source, .headerlink, .md-clipboard') || e.closest('svg') && e.tagName.toLowerCase() !== 'svg' ) continue;
    if (e.tagName.toLowerCase() === 'svg' && !e.closest('.diagram')) continue;  // icons
    if (!e.offsetParent && e.tagName.toLowerCase() !== 'svg') continue;  // not shown (a closed block)
    // Material's table wrapper reaches into the column's padding by design: only what scrolls inside it counts
    const r = e.getBoundingClientRect(), edge = e.classList.contains('md-typeset__scrollwrap') ? 0 : r.right - right;
    const over = Math.max(edge, e.scrollWidth - e.clientWidth - 1);
    if (over > 1) wide.push({block: what(e), px: Math.round(over)});
  }
  const none = [...col.querySelectorAll('td, th')].filter(c => c.textContent.trim() === 'None').length;
  const inShort = [...col.querySelectorAll('.admonition-title, summary, h2, h3, p > strong:first-child')]
    .some(e => /^in short\b/i.test(e.textContent.trim()));
  return {h1: [...document.querySelectorAll('h1')].map(h => h.textContent.replace('¶', '').trim().slice(0, 80)), wide, none, inShort,
          page: document.documentElement.scrollWidth, viewport: innerWidth,
          nav: [...document.querySelectorAll('.md-nav__link')].map(a => a.textContent.trim()),
          diagrams: [...col.querySelectorAll('.diagram svg')].filter(s => s.getBoundingClientRect().height > 50).length};
})()"""

class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass

@pytest.fixture(scope='module')
def server():
    handler = functools.partial(_Quiet, directory=str(DOCS))
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f'http://127.0.0.1:{srv.server_address[1]}'
    srv.shutdown()

@pytest.fixture(scope='module')
def browser():
    with cdp.Browser() as b: yield b

@pytest.fixture(scope='module')
def seen(server, browser):
    "{page: what MEASURE found, plus `outside`: the requests to anything but the local server} for every page."
    tab, out = browser.tab(WIDTH, 900), {}
    for page in sorted(p.name for p in DOCS.glob('*.html')):
        tab.goto(f'{server}/{page}', settle=0.1)
        out[page] = tab.eval(MEASURE)
        out[page]['outside'] = sorted({u for u in tab.requests if not u.startswith((server + '/', 'data:', 'blob:', 'about:'))})
    return out

def test_every_notebook_has_a_page():
    assert [nb.name for nb in NOTEBOOKS if not (DOCS/page_for(nb)).exists()] == []

def test_one_h1_per_page(seen):
    bad = {p: s['h1'] for p, s in seen.items() if len(s['h1']) != 1 and p != '404.html'}
    assert bad == {}, f'pages without exactly one h1 (page: its h1s): {bad}'

def test_no_request_leaves_the_site(seen):
    "Viewing a page fetches nothing from another host: scripts, styles, fonts, images, web APIs (workers included)."
    bad = {p: s['outside'] for p, s in seen.items() if s['outside']}
    assert bad == {}, f'requests outside the site: {bad}'

def test_nothing_is_loaded_from_the_internet_by_markup():
    "No page links a script, stylesheet or image on another host (a canonical link is not a load)."
    for page in DOCS.glob('*.html'):
        ext = [l for t, l in check_site.parse(page).links if t in ('script', 'link', 'img') and re.match(r'(https?:)?//', l)]
        assert ext == [], f'{page.name} loads {ext}'

def test_no_block_but_code_is_wider_than_the_column(seen):
    bad = {p: s['wide'] for p, s in seen.items() if s['wide']}
    n = sum(map(len, bad.values()))
    assert bad == {}, f'{n} blocks wider than the column at {WIDTH} px on {len(bad)} pages: ' + \
        json.dumps({p: w[:4] for p, w in bad.items()}, indent=0)[:6000]

def test_page_never_scrolls_sideways(seen):
    assert {p: (s['page'], s['viewport']) for p, s in seen.items() if s['page'] > s['viewport']} == {}

def test_no_table_cell_reads_none(seen):
    bad = {p: s['none'] for p, s in seen.items() if s['none']}
    assert bad == {}, f'table cells reading "None" (page: count): {bad}'

def test_every_fix_page_has_an_in_short_box(seen):
    assert len(FIX_PAGES) == 6
    assert [p for p in FIX_PAGES if not seen[p]['inShort']] == []

def test_index_renders_with_sidebar(seen):
    nav = seen['index.html']['nav']
    assert 'Overview' in nav
    for nb in NOTEBOOKS:
        if nb.name == 'index.ipynb': continue
        src = ''.join(json.loads(nb.read_text())['cells'][0]['source'])
        title = re.search(r'^#\s+(.+)$', src, re.M).group(1).strip().replace('`', '')
        assert title in nav, f'{title!r} missing from the sidebar'

def test_diagrams_are_drawn_into_the_page(seen):
    "The sequence diagram is an SVG drawn when the site was built: no diagram library is loaded by the page."
    assert seen[page_for(ROOT/'nbs'/'90_pd_meets_spec.ipynb')]['diagrams'] >= 1
    assert not (DOCS/'assets/vendor/mermaid').exists()

def test_phone_width_pages_fit(server, browser):
    "At 390 px the page itself never scrolls sideways; a wide table or diagram scrolls inside its own box."
    tab = browser.tab(390, 844)
    for nb in ('index.ipynb', '90_pd_meets_spec.ipynb', '02_prefill_backoff.ipynb', '79_explain.ipynb'):
        tab.goto(f'{server}/{page_for(nb)}', settle=0.1)
        assert tab.eval('document.documentElement.scrollWidth <= innerWidth'), nb

def test_search_finds_pages(server, browser):
    "A query typed into the site's search returns results (the index is built and the search worker runs)."
    tab = browser.tab(WIDTH, 900)
    tab.goto(f'{server}/index.html', settle=0.1)
    n = tab.eval("""new Promise(done => {
      const box = document.querySelector('input.md-search__input'); let k = 0;
      const tick = () => {
        box.focus(); box.value = 'backoff';
        for (const e of ['focus', 'input', 'keyup']) box.dispatchEvent(new Event(e, {bubbles: true}));
        const n = document.querySelectorAll('.md-search-result__item').length;
        if (n || ++k > 80) done(n); else setTimeout(tick, 100);
      };
      tick();
    })""")
    assert n > 0
