"""Checks over a built site, as files (the browser checks are in tests/test_docs_browser.py).

    python tools/check_site.py SITE_DIR     # print every finding; exit 1 on a broken link or untypeset math

- `broken_links`: every href/src in every page resolves to a file of the site, and every `#anchor` to an
  element id in its target page (404.html's root-relative links are read against `site_url`'s path).
- `untypeset_math`: no page shows TeX a reader would see raw (`$...$`, `\\(...\\)`, `\\frac`...).
- `page_texts`: each page's visible text, and its text without code, for tests/test_docs_site.py's name check.
- `site_bytes`: the site's size.
"""
import re, sys, yaml
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
MAX_SITE_BYTES = 15 * 2**20

class _Page(HTMLParser):
    "Ids, links, visible text and prose text (visible text outside code, pre and math) of one page."
    SKIP = {'script', 'style', 'svg', 'title'}
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.links, self.text, self.prose, self._skip, self._code, self._math = set(), [], [], [], [], 0, []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ('id', 'name'):
            if a.get(k): self.ids.add(a[k])
        for k in ('href', 'src'):
            if a.get(k) is not None and not (tag == 'link' and a.get('rel') in ('canonical', 'alternate')):
                self.links.append((tag, a[k]))
        if tag in self.SKIP: self._skip.append(tag)
        if tag in ('code', 'pre', 'kbd'): self._code += 1
        cls = (a.get('class') or '').split()
        if self._math or 'katex' in cls or 'math' in cls: self._math.append(tag)
    def handle_endtag(self, tag):
        if self._skip and self._skip[-1] == tag: self._skip.pop()
        if tag in ('code', 'pre', 'kbd') and self._code: self._code -= 1
        if self._math and self._math[-1] == tag: self._math.pop()
    def handle_data(self, data):
        if self._skip: return
        self.text.append(data)
        if not self._code and not self._math: self.prose.append(data)

def parse(path):
    p = _Page(); p.feed(Path(path).read_text(errors='replace')); return p

def _site_path(site_dir):
    cfg = ROOT/'mkdocs.yml'
    url = yaml.safe_load(re.sub(r'!!python\S*', '', cfg.read_text())).get('site_url', '') if cfg.exists() else ''
    return urlsplit(url).path or '/'

def pages(site_dir): return sorted(Path(site_dir).rglob('*.html'))

def broken_links(site_dir):
    "[(page, link, why)] for every internal link or anchor of the site that resolves to nothing."
    site = Path(site_dir).resolve()
    parsed = {p.resolve(): parse(p) for p in pages(site)}
    base, bad = _site_path(site), []
    for page, pp in parsed.items():
        for tag, link in pp.links:
            u = urlsplit(link)
            if u.scheme or link.startswith(('//', 'mailto:', 'data:', 'javascript:')): continue
            path = unquote(u.path)
            if path.startswith('/'):
                if not path.startswith(base): bad.append((page.name, link, f'root-relative outside {base}')); continue
                target = site/path[len(base):]
            else: target = (page.parent/path) if path else page
            if target.is_dir(): target = target/'index.html'
            if not target.exists(): bad.append((page.relative_to(site).as_posix(), link, 'no such file')); continue
            if u.fragment and target.suffix == '.html':
                ids = parsed[target.resolve()].ids if target.resolve() in parsed else parse(target).ids
                if unquote(u.fragment) not in ids: bad.append((page.relative_to(site).as_posix(), link, 'no such anchor'))
    return bad

_TEX = re.compile(r'(?<![\\$\w])\$(?!\s)[^$\n]{1,200}?(?<!\s)\$(?!\w)|\\\(|\\\)|\\\[|\\\]|\\(?:frac|lceil|rceil|le|ge|leq|geq|cdot|quad|sum|mathrm|text|min|max)\b')

def untypeset_math(site_dir):
    "{page: [raw TeX seen]} for pages whose prose still shows TeX."
    out = {}
    for p in pages(site_dir):
        raw = sorted({m.group(0) for m in _TEX.finditer(''.join(parse(p).prose))})
        if raw: out[p.relative_to(site_dir).as_posix()] = raw
    return out

def page_texts(site_dir):
    "{page: (visible text, prose text)} of every page."
    return {p.relative_to(site_dir).as_posix(): (''.join(pp.text), ''.join(pp.prose)) for p in pages(site_dir)
            for pp in [parse(p)]}

def site_bytes(site_dir): return sum(f.stat().st_size for f in Path(site_dir).rglob('*') if f.is_file())

if __name__ == '__main__':
    if len(sys.argv) != 2: sys.exit(__doc__)
    site = Path(sys.argv[1])
    links, math = broken_links(site), untypeset_math(site)
    for b in links: print('broken link:', *b)
    for p, raw in math.items(): print('untypeset math:', p, raw)
    n = site_bytes(site)
    print(f'{len(pages(site))} pages, {n/2**20:.1f} MiB (limit {MAX_SITE_BYTES/2**20:.0f}); '
          f'{len(links)} broken links, {len(math)} pages with untypeset math')
    sys.exit(1 if links or math or n > MAX_SITE_BYTES else 0)
