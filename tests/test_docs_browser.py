"""The rendered site, checked as a reader sees it: served over http on 127.0.0.1, every page loaded once in one
headless Chromium at 1,280 px (driven over the DevTools protocol, tools/cdp.py), asserted on the rendered DOM and
on what the page asked the network for. `DOCS_DIR` picks the site (default: the committed `docs/`).

Besides layout (nothing wider than the column, no word or number broken inside a table cell, no code block that
scrolls), the pages tell one story: the same figure for the same run on every page, the verdicts the saved audits
give, every word of the home page and the "In short" boxes in the glossary, no machine path or build-log words
(tools/check_site.py holds the rules; known offenders wait in tests/content_offenders.json)."""
import functools, http.server, json, os, re, sys, threading
from pathlib import Path
import pytest
from nbdev.config import nbpath2html

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import cdp, check_site, house_rules, prep_docs  # noqa: E402
DOCS = Path(os.environ.get('DOCS_DIR') or ROOT/'docs')
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not cdp.chromium_path(), reason='headless Chromium not installed (`make browser` installs it)'),
              pytest.mark.skipif(not (DOCS/'index.html').exists(), reason=f'no site at {DOCS} (`make docs`)')]

def page_for(nb): return nbpath2html(nb).name  # nbdev's own page name for a notebook

NOTEBOOKS = sorted((ROOT/'nbs').glob('*.ipynb'))
FIX_PAGES = [p + '.html' for p in prep_docs.FIXES]  # fixes 1-6, one page each
WIDTH = 1280

# What one page shows at WIDTH: its h1s; every block that is wider than the content column (its own box past the
# column's right edge, or content scrolled inside it; a table scrolls in its own scroller by design, so only what
# pushes past that counts); every line break inside a word or a number of a table cell; table cells reading "None";
# an "In short" box; and what the story checks read (the page's text, link texts, headline figures, tables).
MEASURE = r"""(() => {
  const col = document.querySelector('.md-content__inner'), cr = col.getBoundingClientRect();
  const cs = getComputedStyle(col), right = cr.right - parseFloat(cs.paddingRight) + 1;
  const what = e => (e.tagName.toLowerCase() + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ')[0] : '')
                     + ': ' + (e.innerText || e.getAttribute('alt') || '').trim().slice(0, 60).replace(/\s+/g, ' '));
  const wide = [], scrolls = [];
  for (const e of col.querySelectorAll('table, pre, pre > code, .nb-html, img, svg, .katex-display, .diagram, .admonition, details')) {
    if (e.closest('.md-source, .headerlink, .md-clipboard') || e.closest('svg') && e.tagName.toLowerCase() !== 'svg' ) continue;
    if (e.tagName.toLowerCase() === 'svg' && !e.closest('.diagram')) continue;  // icons
    if (!e.offsetParent && e.tagName.toLowerCase() !== 'svg') continue;  // not shown (a closed block)
    const scroller = e.closest('.md-typeset__scrollwrap, .nb-html');
    if (e.tagName.toLowerCase() === 'table' && scroller) continue;  // a table scrolls in its own box
    const r = e.getBoundingClientRect(), edge = r.right - right;
    const over = Math.max(edge, e.classList.contains('nb-html') ? 0 : e.scrollWidth - e.clientWidth - 1);
    if (over > 1) wide.push({block: what(e), px: Math.round(over)});
    if (e.scrollWidth - e.clientWidth > 1 && !scroller && !e.classList.contains('nb-html')) scrolls.push(what(e));
  }
  // a line break between two characters of one token of a table cell (not after a space, a hyphen, a slash or at <wbr>)
  const breaks = [], okAfter = /[-\u2010\u2013\u2014_\/\s\u200b]/;
  const top = (n, i) => { const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
                          const rs = r.getClientRects(); return rs.length ? rs[0].top : null; };
  for (const cell of col.querySelectorAll('td, th')) {
    if (!cell.offsetParent) continue;
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
    let prev = null;
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (n.nodeType === 1) { if (n.tagName === 'WBR' || n.tagName === 'BR') prev = null; continue; }
      const t = n.data, whole = document.createRange(); if (!t) continue;
      whole.selectNodeContents(n);
      const multi = new Set([...whole.getClientRects()].map(x => Math.round(x.top))).size > 1;
      for (const i of multi ? Array.from(t, (_, j) => j) : [0, t.length - 1]) {
        const ch = t[i];
        if (/\s/.test(ch) || ch === '\u200b') { prev = null; continue; }
        const y = top(n, i); if (y === null) continue;
        if (prev && y > prev.top + 2 && !okAfter.test(prev.ch))
          breaks.push(cell.innerText.trim().replace(/\s+/g, ' ').slice(0, 60) + ' (between ' + prev.ch + ' and ' + ch + ')');
        prev = {ch, top: y};
      }
    }
  }
  const none = [...col.querySelectorAll('td, th')].filter(c => c.textContent.trim() === 'None').length;
  const box = [...col.querySelectorAll('.admonition')].find(a => /^in short\b/i.test((a.querySelector('.admonition-title') || {}).textContent || ''));
  const inShort = !!box || [...col.querySelectorAll('.admonition-title, summary, h2, h3, p > strong:first-child')]
    .some(e => /^in short\b/i.test(e.textContent.trim()));
  const prose = col.cloneNode(true);
  prose.querySelectorAll('pre, code, svg, script, style, .headerlink, .md-source-file').forEach(e => e.remove());
  return {h1: [...document.querySelectorAll('h1')].map(h => h.textContent.replace('¶', '').trim().slice(0, 80)), wide, scrolls, breaks, none, inShort,
          page: document.documentElement.scrollWidth, viewport: innerWidth,
          nav: [...document.querySelectorAll('.md-nav__link')].map(a => a.textContent.trim()),
          navLinks: [...document.querySelectorAll('.md-sidebar--primary .md-nav__link[href]')].map(a => [a.textContent.trim(), a.getAttribute('href')]),
          diagrams: [...col.querySelectorAll('.diagram svg')].filter(s => s.getBoundingClientRect().height > 50).length,
          figures: [...col.querySelectorAll('img.nb-figure')].map(i => [i.getAttribute('src'), (i.closest('a') || {href: null}).href && i.closest('a').getAttribute('href')]),
          text: col.innerText, prose: prose.textContent,
          linkTexts: [...col.querySelectorAll('a[href]')].filter(a => !a.closest('.headerlink')).map(a => a.textContent.trim()).filter(t => t),
          headlines: [...col.querySelectorAll('.headline')].map(e => Object.assign({text: e.innerText.trim(), inShort: !!(box && box.contains(e)),
                                                                                      inTable: !!e.closest('td')}, e.dataset)),
          inShortText: box ? box.innerText : null,
          inShortCode: box ? [...box.querySelectorAll('code')].map(c => c.textContent) : [],
          inShortProse: box ? (b => { b.querySelectorAll('pre, code').forEach(e => e.remove()); return b.textContent; })(box.cloneNode(true)) : null,
          proseCode: [...col.querySelectorAll('p code, li code')].map(c => c.textContent),
          h3: [...col.querySelectorAll('h3')].map(h => h.textContent.replace('¶', '').trim()),
          pagesList: (h => { const out = []; for (let e = h && h.nextElementSibling; e && e.tagName !== 'H2'; e = e.nextElementSibling)
                               out.push(...[...e.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))); return out; })(document.getElementById('pages')),
          tables: [...col.querySelectorAll('table')].slice(0, 12).map(t => [...t.rows].map(r => [...r.cells].map(c => c.innerText.trim())))};
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
    def measure(tab):
        r = tab.eval(MEASURE)
        r['outside'] = sorted({u for u in tab.requests if not u.startswith((server + '/', 'data:', 'blob:', 'about:'))})
        return r
    pages = sorted(p.name for p in DOCS.glob('*.html'))  # three tabs load at a time: what each measures is the same as one tab's
    return {url.rsplit('/', 1)[1]: r for url, r in browser.visit([f'{server}/{p}' for p in pages], measure, tabs=3, width=WIDTH, settle=0.1).items()}

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

def test_no_block_is_wider_than_the_column(seen):
    "Code blocks wrap, outputs and figures fit; a table wider than the column scrolls in its own box."
    bad = {p: s['wide'] for p, s in seen.items() if s['wide']}
    n = sum(map(len, bad.values()))
    assert bad == {}, f'{n} blocks wider than the column at {WIDTH} px on {len(bad)} pages: ' + \
        json.dumps({p: w[:4] for p, w in bad.items()}, indent=0)[:6000]

def test_no_table_cell_breaks_a_word_or_a_number(seen):
    "A cell wraps at spaces, after hyphens and slashes, and at the break points the site adds to names: never mid-token."
    bad = {p: s['breaks'] for p, s in seen.items() if s['breaks']}
    assert bad == {}, f'{sum(map(len, bad.values()))} breaks inside a word or a number at {WIDTH} px: ' + \
        json.dumps({p: b[:4] for p, b in bad.items()}, indent=0)[:6000]

def test_figures_open_at_full_size(seen):
    "Every figure is a link to its own image, which a phone reader opens and zooms."
    bad = {p: [src for src, href in s['figures'] if href != src] for p, s in seen.items()}
    assert {p: v for p, v in bad.items() if v} == {}

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

def test_the_home_pages_list_follows_the_nav(seen):
    "The home page's 'Pages' list links the nav's pages in the nav's order (both from tools/prep_docs.py's map)."
    home = seen['index.html']
    nav = [h.replace('index.html#', '#') for _, h in home['navLinks'] if h not in ('.', './', 'index.html') and not h.startswith('#')]  # not the page's own TOC
    assert home['pagesList'] and home['pagesList'] == nav

def test_diagrams_are_drawn_into_the_page(seen):
    "The sequence diagram is an SVG drawn when the site was built: no diagram library is loaded by the page."
    assert seen[page_for(ROOT/'nbs'/'90_pd_meets_spec.ipynb')]['diagrams'] >= 1
    assert not (DOCS/'assets/vendor/mermaid').exists()

def test_phone_width_pages_fit(server, browser):
    """At 390 px the page itself never scrolls sideways (a wide table or diagram scrolls inside its own box), no code block
    scrolls and no table cell breaks a word or a number."""
    tab = browser.tab(390, 844)
    for nb in ('index.ipynb', '90_pd_meets_spec.ipynb', '95b_fix2_prefill_backoff.ipynb', '92_findings.ipynb', '79_explain.ipynb'):
        tab.goto(f'{server}/{page_for(nb)}', settle=0.1)
        s = tab.eval(MEASURE)
        assert s['page'] <= s['viewport'], nb
        assert [w for w in s['scrolls'] if w.startswith(('pre', 'code'))] == [], nb
        assert s['breaks'] == [], (nb, s['breaks'][:4])

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

# ---- one story to a reader (tools/check_site.py holds the rules; known offenders: tests/content_offenders.json) ----

NB_OF_PAGE = {page_for(nb): f'nbs/{nb.name}' for nb in NOTEBOOKS}
FIX_NBS = {i: NB_OF_PAGE[p] for i, p in enumerate(FIX_PAGES, 1)}
BEYOND_NBS = [NB_OF_PAGE[p + '.html'] for s, ps in prep_docs.NAV if s == 'Beyond the six' for p in ps if p + '.html' in NB_OF_PAGE]

@pytest.fixture(scope='module')
def answers():
    "explain's answers now, from the saved audits: {(release, connector): drafter_answers}."
    from vllm_pd_spec.explain import drafter_answers, supported_releases
    return {(r, c): drafter_answers(r, c) for r in supported_releases() for c in check_site.CONNECTORS}

def _verdict(check, found):
    msg = house_rules.verdict(check, {p: v for p, v in found.items() if v})
    assert not msg, msg

def test_a_run_shows_the_same_figures_on_every_page(seen):
    "The home table, the 'In short' boxes and the findings: one fix, metric and run, one pair of figures."
    _verdict('headline_mismatches', check_site.headline_mismatches(check_site.headline_items(seen)))

def test_every_headline_figure_names_its_run(seen):
    "A headline figure says which run it is (setting, requests, seeds): otherwise two runs' figures read as a contradiction."
    _verdict('unlabelled_headlines', check_site.unlabelled_headlines(check_site.headline_items(seen)))

def test_legacy_and_fixed_labels_agree_with_the_audits(seen, answers):
    "A figure's legacy release is affected (its fixed release fixed) for the connector it stands for, as explain says."
    _verdict('label_mismatches', check_site.label_mismatches(check_site.headline_items(seen), answers, FIX_NBS))

def test_verdicts_are_explains(seen, answers):
    "The home page's 'am I affected' table and each fix page's 'Where.' line say what explain says from the saved audits now."
    home = seen['index.html']
    found = {}
    table = check_site._table(home['tables'], 'vLLM', 'connector')
    assert table, 'no "am I affected" table on the home page'
    found.update(check_site.affected_mismatches(table, answers, FIX_NBS, BEYOND_NBS))
    results = check_site._table(home['tables'], 'fix', 'invariant held (fixed)')
    if results:
        for p, v in check_site.invariant_mismatches(results, home['text']).items(): found.setdefault(p, []).extend(v)
    for i, p in enumerate(FIX_PAGES, 1):
        found.update(check_site.where_mismatches(p, seen[p]['inShortText'], i, answers, FIX_NBS))
    _verdict('verdict_mismatches', found)

def test_the_glossary_defines_every_word_of_the_home_page_and_the_in_short_boxes(seen):
    terms = check_site.glossary_terms(seen[page_for(ROOT/'nbs'/'91_glossary.ipynb')]['h3'])
    missing = {'index.html': check_site.undefined_terms(seen['index.html']['prose'], seen['index.html']['proseCode'], terms)}
    for p in FIX_PAGES: missing[p] = check_site.undefined_terms(seen[p]['inShortProse'] or '', seen[p]['inShortCode'], terms)
    assert {p: v for p, v in missing.items() if v} == {}, 'words the glossary does not define (page: words)'

def test_no_machine_path_or_build_log_words(seen):
    "A page speaks to its reader: no `/tmp/...` path, no words from how a run was made ('the machine without network')."
    _verdict('build_words_pages', {p: house_rules.build_words(s['text']) for p, s in seen.items()})

def test_no_notebook_name_is_a_link_text(seen):
    _verdict('notebook_link_texts', {p: check_site.notebook_link_texts(s['linkTexts']) for p, s in seen.items()})
