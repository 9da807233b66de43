"""The rendered site, checked as a reader sees it: served over http on 127.0.0.1, loaded in headless
Chromium, asserted on the rendered DOM. `DOCS_DIR` picks the site (default: the committed `docs/`)."""
import functools, http.server, json, os, re, shutil, subprocess, tempfile, threading
from pathlib import Path
import pytest, sys
from nbdev.config import nbpath2html

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import check_site  # noqa: E402
DOCS = Path(os.environ.get('DOCS_DIR') or ROOT/'docs')
CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM, reason='headless Chromium not installed (`make browser` installs it)'),
              pytest.mark.skipif(not (DOCS/'index.html').exists(), reason=f'no site at {DOCS} (`make docs`)')]

def page_for(nb): return nbpath2html(nb).name  # nbdev's own page name for a notebook

NOTEBOOKS = sorted((ROOT/'nbs').glob('*.ipynb'))

@pytest.fixture(scope='module')
def server():
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(DOCS))
    handler.log_message = lambda *a: None
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f'http://127.0.0.1:{srv.server_address[1]}'
    srv.shutdown()

def chromium(*args):
    with tempfile.TemporaryDirectory() as prof:
        cmd = [CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
               '--disable-background-networking', '--disable-component-update', '--disable-sync',
               '--disable-dev-shm-usage', f'--user-data-dir={prof}', *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

def dom(url): return chromium('--virtual-time-budget=3000', '--dump-dom', url).stdout

def title_of(nb):
    "The notebook's title as the nav shows it (without markdown code marks)."
    src = ''.join(json.loads(nb.read_text())['cells'][0]['source'])
    return re.search(r'^#\s+(.+)$', src, re.M).group(1).strip().replace('`', '')

def test_every_notebook_has_a_page():
    assert [nb.name for nb in NOTEBOOKS if not (DOCS/page_for(nb)).exists()] == []

def test_index_renders_with_sidebar(server):
    html = dom(server + '/index.html')
    assert '<title>vllm_pd_spec</title>' in html
    nav = re.findall(r'class="md-nav__link[^"]*"[^>]*>\s*(?:<span[^>]*>)?\s*([^<]+?)\s*<', html)
    assert 'Overview' in nav
    for nb in NOTEBOOKS[1:] if NOTEBOOKS[0].name == 'index.ipynb' else NOTEBOOKS:
        if nb.name != 'index.ipynb': assert title_of(nb) in nav, f'{title_of(nb)!r} missing from the sidebar'
    assert 'Two commands' in html

def test_other_page_renders_and_screenshot(server, tmp_path):
    other = next(nb for nb in NOTEBOOKS if nb.name != 'index.ipynb')
    html = dom(f'{server}/{page_for(other)}')
    assert f'<h1 id=' in html and title_of(other) in html
    assert 'md-sidebar' in html
    shot = tmp_path/'page.screenshot.png'
    chromium('--window-size=1280,900', f'--screenshot={shot}', f'{server}/{page_for(other)}')
    assert shot.exists() and shot.stat().st_size > 10_000

def test_search_index_served(server):
    import urllib.request
    idx = json.loads(urllib.request.urlopen(server + '/search/search_index.json').read())
    locs = {d['location'].split('#')[0] for d in idx['docs']}
    assert {page_for(nb) for nb in NOTEBOOKS if nb.name != 'index.ipynb'} <= locs

def test_nothing_fetched_from_the_internet():
    "No page loads a script, stylesheet or image from another host (a canonical link is not a load)."
    for page in DOCS.glob('*.html'):
        ext = [l for t, l in check_site.parse(page).links if t in ('script', 'link', 'img') and re.match(r'(https?:)?//', l)]
        assert ext == [], f'{page.name} loads {ext}'

# A page of the test's own, served beside the site, loads a site page in an iframe of a given size, measures it as
# a reader sees it (the first table's geometry, search results for a typed query, rendered diagrams) in real time,
# and posts the result back; the server holds the probe page's load event (its `wait` image) until then.
PROBE = """<!doctype html><html><body style="margin:0"><pre id="out"></pre><script>
const p = new URLSearchParams(location.search), f = document.createElement('iframe');
f.style.cssText = `width:${p.get('w')}px;height:${p.get('h')}px;border:0`; f.src = 'site/' + p.get('page');
document.body.appendChild(f); let n = 0;
function probe() {
  const d = f.contentDocument, w = f.contentWindow, out = {};
  if (d && d.readyState === 'complete' && d.querySelector('.md-content')) {
    const t = d.querySelector('.md-content table');
    if (t) { const wrap = t.closest('.md-typeset__scrollwrap') || t.parentElement, r = wrap.getBoundingClientRect();
      out.table = {table: t.getBoundingClientRect().width, wrap: wrap.clientWidth, overflow: w.getComputedStyle(wrap).overflowX,
                   right: r.right, font: parseFloat(w.getComputedStyle(t).fontSize)}; }
    out.page = d.documentElement.scrollWidth; out.viewport = w.innerWidth;
    out.results = d.querySelectorAll('.md-search-result__item').length;
    const meta = d.querySelector('.md-search-result__meta'); out.meta = meta ? meta.textContent : null;
    out.diagrams = [...d.querySelectorAll('div.mermaid')].filter(m => m.offsetHeight > 50).length;  // drawn (in a closed shadow root)
    out.undrawn = d.querySelectorAll('pre.mermaid').length;
    const box = d.querySelector('input.md-search__input');
    if (p.get('q') && box && !out.results) {  // type the query as a reader would
      box.focus(); box.value = p.get('q');
      for (const e of ['focus', 'input', 'keyup']) box.dispatchEvent(new w.Event(e, {bubbles: true}));
    }
  }
  const done = p.get('q') ? out.results > 0 : (p.get('wait') === 'mermaid' ? out.diagrams > 0 : out.page);
  if (done || ++n > 300) fetch('result', {method: 'POST', body: JSON.stringify(out)}); else setTimeout(probe, 100);
}
setTimeout(probe, 200);
</script><img src="wait" hidden></body></html>"""

class _ProbeHandler(http.server.SimpleHTTPRequestHandler):
    result, done = None, None
    def log_message(self, *a): pass
    def do_POST(self):
        type(self).result = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        type(self).done.set()
        self.send_response(204); self.end_headers()
    def do_GET(self):
        if self.path.split('?')[0] != '/wait': return super().do_GET()
        type(self).done.wait(40)
        self.send_response(204); self.end_headers()

@pytest.fixture(scope='module')
def probe(tmp_path_factory):
    "probe(page, w, h, **params) -> what the probe page measured in headless Chromium."
    root = tmp_path_factory.mktemp('probe')
    (root/'site').symlink_to(DOCS.resolve(), target_is_directory=True)
    (root/'probe.html').write_text(PROBE)
    handler = functools.partial(_ProbeHandler, directory=str(root))
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    def run(page, w=1400, h=1000, **params):
        _ProbeHandler.result, _ProbeHandler.done = None, threading.Event()
        q = '&'.join(f'{k}={v}' for k, v in dict(page=page, w=w, h=h, **params).items())
        chromium(f'--window-size={w + 20},{h + 80}', '--dump-dom', f'http://127.0.0.1:{srv.server_address[1]}/probe.html?{q}')
        return _ProbeHandler.result or {}
    yield run
    srv.shutdown()

@pytest.mark.parametrize('w,h', [(1400, 1000), (390, 844)], ids=['desktop', 'phone'])
def test_index_table_fits_or_scrolls(probe, w, h):
    "The results table is readable: it fits its column, or scrolls sideways inside it; the page itself never does."
    out = probe('index.html', w, h)
    t = out.get('table')
    assert t, f'no table measured: {out}'
    assert out['page'] <= out['viewport'], f'the page scrolls sideways at {w} px: {out}'
    assert t['table'] <= t['wrap'] + 1 or (t['overflow'] in ('auto', 'scroll') and t['right'] <= out['viewport']), out
    assert t['font'] >= 11, f'table text too small to read: {t}'

def test_search_finds_pages(probe):
    "A query typed into the site's search returns results (the index is built and the search worker runs)."
    out = probe('index.html', q='backoff')
    assert out.get('results', 0) > 0, json.dumps(out)

def test_diagrams_render_from_the_sites_own_copy(probe):
    page = nbpath2html(ROOT/'nbs'/'40_pd_meets_spec.ipynb').name
    out = probe(page, wait='mermaid')
    assert out.get('diagrams', 0) >= 1 and out.get('undrawn') == 0, json.dumps(out)
