"""The rendered site, checked as a reader sees it: served over http on 127.0.0.1, loaded in headless
Chromium, asserted on the rendered DOM. `DOCS_DIR` picks the site (default: the committed `docs/`)."""
import functools, http.server, json, os, re, shutil, subprocess, tempfile, threading
from pathlib import Path
import pytest
from nbdev.config import nbpath2html

ROOT = Path(__file__).resolve().parents[1]
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
    src = ''.join(json.loads(nb.read_text())['cells'][0]['source'])
    return re.search(r'^#\s+(.+)$', src, re.M).group(1).strip()

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
    for page in DOCS.glob('*.html'):
        ext = re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="(https?://[^"]+)"', page.read_text())
        assert ext == [], f'{page.name} loads {ext}'
