"""Checks over a built site, as files (the browser checks are in tests/test_docs_browser.py).

    python tools/check_site.py SITE_DIR     # print every finding; exit 1 on a broken link or untypeset math

- `broken_links`: every href/src in every page resolves to a file of the site, and every `#anchor` to an
  element id in its target page (404.html's root-relative links are read against `site_url`'s path).
- `untypeset_math`: no page shows TeX a reader would see raw (`$...$`, `\\(...\\)`, `\\frac`...).
- `page_texts`: each page's visible text, and its text without code, for tests/test_docs_site.py's name check.
- `site_bytes`: the site's size.

One story to a reader, from what each page shows (tests/test_docs_browser.py reads it from the rendered pages):
- `headline_items`, `headline_mismatches`, `unlabelled_headlines`: every headline figure (the home page's results table,
  each fix page's "In short", any figure marked by `vllm_pd_spec.tables.headline`) with its run label; two pages that
  show different figures for the same fix, metric and run disagree (a figure without a run label cannot be told apart
  from another run's, so it is compared with every run's, and named), and the home table's figure for a fix is one
  its fix page's "In short" shows;
- `label_mismatches`: a figure whose legacy (or fixed) code is an audited release that the saved audits find fixed (or
  affected) with some connector, and whose label does not say which connector it stands for;
- `affected_mismatches`, `where_mismatches`: the home page's "am I affected" table and each fix page's "Where." line
  against `explain`'s answers from the saved audits now (a page executed before an audit was added or changed);
  `invariant_mismatches`: the home results table's verdict column against the sentence under it;
- `glossary_terms`, `undefined_terms`: the words the home page and the "In short" boxes use that the glossary lacks;
- `house_rules.build_words` (machine paths, words from a build log), `notebook_link_texts`, and `failing_installs` (an
  install line that asks the package index for this package).
"""
import json, re, sys, yaml
import prep_docs
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
MAX_SITE_BYTES = 16 * 2**20  # each page carries the whole nav (about 60 KB): the reader pages of the twelve entries add about 1 MB

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

# ---- one story: headline figures, verdicts, vocabulary ----

FIX_PAGES = {i: f'{p}.html' for i, p in enumerate(prep_docs.FIXES, 1)}  # fix number: its page
CONNECTORS = {'NixlConnector': 'NIXL', 'MooncakeConnector': 'Mooncake', 'MoRIIOConnector': 'MoRI-IO'}
_FIG = r'[-+]?\d+(?:\.\d+)?%?'
_SAID = re.compile(r'^(?P<metric>.+?): \**(?P<legacy>' + _FIG + r')\** legacy(?: \((?P<legacy_label>[^()]*(?:\([^()]*\))?[^()]*)\))?'
                   r' → \**(?P<fixed>' + _FIG + r')\** fixed(?: \((?P<fixed_label>[^()]*(?:\([^()]*\))?[^()]*)\))?')
_CELL = re.compile(r'^(?P<metric>.+?): (?P<legacy>' + _FIG + r') → (?P<fixed>' + _FIG + r')(?:\s|$)')

def _norm(metric): return re.sub(r'\s+', ' ', metric).strip(' .;:').lower()

def _code(label):
    "The code a label names, without its explanation: '0.27.1 (has #47466; ...)' -> '0.27.1'."
    return (label or '').split(' (')[0].strip() or None

def _in_short_items(text):
    "The measured sentences of an 'In short' box's text: '(1) a. (2) b.' or one sentence."
    m = re.search(r'What we measured\.\s*(.*?)\s*What to do\.', text or '', re.S)
    if not m: return []
    body = m.group(1).strip()
    return [x.strip() for x in re.split(r'(?:^|\s)\(\d+\)\s', body) if x.strip()] if body.startswith('(1)') else [body]

def _table(tables, *heads):
    "The first table (rows of cell texts, header first) whose header holds every one of `heads`."
    return next((t for t in tables if t and all(h in t[0] for h in heads)), None)

_RUN = re.compile(r'\bRun: (?P<run>[^;]+?)\.?\s*(?:;|$)', re.S)

def run_of(text):
    "The run label a cell or a sentence writes after 'Run: ' (up to a ';' or its end), or None."
    m = _RUN.search(text or '')
    return re.sub(r'\s+', ' ', m.group('run')).strip() if m else None

def headline_items(pages:dict)->list:
    """Every headline figure the pages show: marked ones (`headline` spans), else the home table's and the 'In short'
    boxes' figures, each with its run label (marked: `data-run`; a cell or a sentence: the words after 'Run: ')."""
    fix_of = {p: i for i, p in FIX_PAGES.items()}
    out = []
    for page, s in pages.items():
        marked = s.get('headlines') or []
        for h in marked:
            fix = int(h['fix']) if h.get('fix') else fix_of.get(page)
            out.append(dict(page=page, fix=fix, run=h.get('run'), metric=h.get('metric', ''), legacy=h.get('legacy'),
                            fixed=h.get('fixed'), legacy_label=h.get('legacyLabel'), fixed_label=h.get('fixedLabel'),
                            consequence=h.get('consequence'), invariant=h.get('invariant'), marked=True,
                            where='in_short' if h.get('inShort') else 'table' if h.get('inTable') else 'page'))
        if page in fix_of and not any(h.get('inShort') for h in marked):
            for item in _in_short_items(s.get('inShortText')):
                m = _SAID.match(item)
                if m: out.append(dict(page=page, fix=fix_of[page], run=run_of(item), marked=False, where='in_short', **m.groupdict()))
        t = _table(s.get('tables') or [], 'fix', 'metric: legacy → fixed') if page == 'index.html' else None
        if t and not any(h.get('inTable') for h in marked):
            col = {h: i for i, h in enumerate(t[0])}
            for row in t[1:]:
                cell = row[col['metric: legacy → fixed']]
                m = _CELL.match(cell)
                fix = re.match(r'\d+', row[col['fix']])
                if m and fix:
                    out.append(dict(page=page, fix=int(fix.group(0)), run=run_of(cell), marked=False, where='table',
                                    legacy_label=row[col['legacy code']] if 'legacy code' in col else None, fixed_label=None,
                                    consequence=row[col['consequence seen (legacy)']] if 'consequence seen (legacy)' in col else None,
                                    invariant=row[col['invariant held (fixed)']] if 'invariant held (fixed)' in col else None,
                                    **m.groupdict()))
    return out

def _figure(x):
    "(value, decimals shown) of a figure as a page writes it, or (the text, None)."
    m = re.fullmatch(r'\s*([-+]?\d+(?:\.(\d+))?)%?\s*', str(x))
    return (float(m.group(1)), len(m.group(2) or '')) if m else (str(x).strip(), None)

def same_figure(a, b)->bool:
    "Whether two figures as pages write them are the same number at the coarser of their two precisions (2.7219 and 2.722)."
    (x, i), (y, j) = _figure(a), _figure(b)
    if i is None or j is None: return x == y
    return round(x, min(i, j)) == round(y, min(i, j)) or abs(x - y) < 10 ** -min(i, j) / 2 + 1e-12

def metric_key(metric:str)->tuple:
    "A metric's words, in any order ('X on D (1 + a / b), MTP k=3' and 'X on D, MTP k=3 (1 + a / b)' are one metric)."
    return tuple(sorted(set(re.findall(r"[\w'=<>.+/-]+", _norm(metric).replace('(', ' ').replace(')', ' ')))))

def _same_run(a, b):
    "Whether two labels (runs, or legacy codes) may name the same thing: equal, or one is None (a reader cannot tell them apart)."
    return a is None or b is None or _norm(a) == _norm(b)

def _shows(h): return f"{h['legacy']} → {h['fixed']}"

def _same(a, b): return same_figure(a['legacy'], b['legacy']) and same_figure(a['fixed'], b['fixed'])

def headline_mismatches(items:list)->dict:
    """{'page + page': [what differs]}: two pages that show different figures for one fix, metric (its words in any
    order), legacy code and run (a figure that names no run, or no legacy code, matches every one); and each home-table
    figure that its fix page's 'In short' does not show (one run's figures on both)."""
    groups, out, told = {}, {}, set()  # told: (figure, page) pairs already named
    for h in items: groups.setdefault((h['fix'], metric_key(h['metric'])), []).append(h)
    for (fix, _), hs in groups.items():
        for i, a in enumerate(hs):
            for b in hs[i + 1:]:
                ca, cb = _code(a.get('legacy_label')), _code(b.get('legacy_label'))
                if a['page'] == b['page'] or not _same_run(a['run'], b['run']) or not _same_run(ca, cb) or _same(a, b): continue
                pages = ' + '.join(sorted({a['page'], b['page']}))
                run, code = a['run'] or b['run'] or 'no run label', ca or cb
                told |= {(id(a), b['page']), (id(b), a['page'])}
                out.setdefault(pages, []).append(f"fix {fix}, {_norm(a['metric'])} ({run}; legacy {code or 'unnamed'}): "
                                                 + '; '.join(f"{_shows(h)} on {h['page']}" for h in sorted((a, b), key=lambda h: h['page'])))
    for h in items:  # the home table's figure is its fix page's headline
        page = FIX_PAGES.get(h['fix'])
        if h['page'] != 'index.html' or h['where'] != 'table' or not page or (id(h), page) in told: continue
        short = [x for x in items if x['page'] == page and x['where'] == 'in_short']
        if any(_same(h, x) and _same_run(h['run'], x['run']) for x in short): continue
        pages = ' + '.join(sorted({h['page'], page}))
        shown = '; '.join(f"{_shows(x)} (legacy {_code(x.get('legacy_label')) or 'unnamed'})" for x in short) or 'no figure'
        out.setdefault(pages, []).append(f"fix {h['fix']}, the home table's {_norm(h['metric'])} ({h['run'] or 'no run label'}; "
                                         f"legacy {_code(h.get('legacy_label')) or 'unnamed'}): {_shows(h)} on index.html; "
                                         f"{page}'s In short shows {shown}")
    return {p: sorted(set(v)) for p, v in out.items()}

def unlabelled_headlines(items:list)->dict:
    "{page: ['fix N: metric']} for each headline figure that names no run (its setting, requests and seeds)."
    out = {}
    for h in items:
        if not h['run']: out.setdefault(h['page'], []).append(f"fix {h['fix']}: {_norm(h['metric'])}")
    return {p: sorted(set(v)) for p, v in out.items()}

def _release(label):
    m = re.match(r'\s*(\d+\.\d+\.\d+)\b', label or '')
    return m.group(1) if m else None

def label_mismatches(items:list, answers:dict, fix_nbs:dict)->dict:
    """{page: [why]} for each figure whose legacy code is an audited release some connector has fixed (or whose fixed
    code is one some connector still has in the legacy form) while its label names no connector: `answers` is
    {(release, connector): explain's `drafter_answers`}, `fix_nbs` {fix: its notebook as `answers` keys it}."""
    out = {}
    for h in items:
        for side, want, bad in (('legacy', 'affected', 'ok'), ('fixed', 'ok', 'affected')):
            label = h.get(f'{side}_label') or ''
            rel = _release(label)
            if not rel or (rel, 'NixlConnector') not in answers or h['fix'] not in fix_nbs: continue
            said = {c: answers[(rel, c)].get(fix_nbs[h['fix']], ('n/a', None))[0] for c in CONNECTORS}
            named = [c for c, n in CONNECTORS.items() if re.search(rf'\b{re.escape(n)}\b', label, re.I)]
            if named and all(said[c] != bad for c in named): continue
            if not named and all(v != bad for v in said.values()): continue
            wrong = ', '.join(CONNECTORS[c] for c, v in said.items() if v == bad)
            right = ', '.join(CONNECTORS[c] for c, v in said.items() if v == want) or 'none'
            out.setdefault(h['page'], []).append(
                f"fix {h['fix']}: {side} code {rel} ({_norm(h['metric'])[:60]}), but the audit finds {rel} "
                f"{'fixed' if bad == 'ok' else 'affected'} with {wrong}: name the connector ({want} with: {right})")
    return {p: sorted(set(v)) for p, v in out.items()}

_WORD = {'affected': 'affected', 'fixed': 'ok', 'not audited': 'unknown', '—': 'n/a', '-': 'n/a', '': 'n/a'}

def _verdict(cell):
    "explain's status for a home-table cell: 'affected → 0.33.0' is affected, 'fixed' ok, 'not audited' unknown, '—' n/a."
    c = cell.replace('*', '').strip().lower()
    return next((v for w, v in _WORD.items() if w and c.startswith(w)), 'n/a' if c in ('', '—', '-') else c)

def affected_mismatches(rows:list, answers:dict, fix_nbs:dict, beyond_nbs:list)->dict:
    "{'index.html': [why]} where the home page's 'am I affected' table (rows of cell texts, header first) differs from `answers`."
    head, out = rows[0], []
    names = {n: c for c, n in CONNECTORS.items()}
    col = {h: i for i, h in enumerate(head)}
    seen = set()
    for r in rows[1:]:
        rel, conn = r[col['vLLM']].strip(), names.get(r[col['connector']].strip())
        if (rel, conn) not in answers: out.append(f'{rel} {r[col["connector"]]}: no saved audit answers for it'); continue
        seen.add((rel, conn))
        a = answers[(rel, conn)]
        for fix, nb in fix_nbs.items():
            if f'Fix {fix}' not in col: continue
            shown, now = _verdict(r[col[f'Fix {fix}']]), a.get(nb, ('n/a', None))[0]
            if shown != now: out.append(f'{rel} {CONNECTORS[conn]}, fix {fix}: the page reads {shown}, explain says {now}')
        if 'beyond the six' in col and r[col['beyond the six']].strip() == 'none':
            open_ = [nb for nb in beyond_nbs if a.get(nb, ('n/a',))[0] in ('affected', 'unknown')]
            if open_: out.append(f'{rel} {CONNECTORS[conn]}, beyond the six: the page reads none, explain says '
                                 + ', '.join(f"{a[nb][0]} for {Path(nb).stem}" for nb in open_))
    for rel, conn in sorted(set(answers) - seen):
        out.append(f'{rel} {CONNECTORS.get(conn, conn)}: a saved audit the table does not show')
    return {'index.html': out} if out else {}

_WHERE = re.compile(r'(affected in|fixed in|not decided by the audit in)\s+(.*?)(?=;\s*(?:affected in|fixed in|not decided)|\s*\(the saved audits|$)', re.S | re.I)

def where_verdicts(text:str)->dict:
    "{(release, connector name): status} read from an 'In short' box's 'Where.' line ('every connector' expanded)."
    m = re.search(r'Where\.\s*(.*?)\s*What we measured\.', text or '', re.S)
    out = {}
    if not m: return out
    status = {'affected in': 'affected', 'fixed in': 'ok', 'not decided by the audit in': 'unknown'}
    for part, body in _WHERE.findall(m.group(1)):
        part = part.lower()
        if body.startswith('none'): continue
        for rel, conns in re.findall(r'(\d+\.\d+\.\d+)\s*\(([^)]*)\)', body):
            for c in (CONNECTORS.values() if conns.strip() == 'every connector' else [x.strip() for x in conns.split(',')]):
                out[(rel, c)] = status[part]
    return out

def where_mismatches(page:str, text:str, fix:int, answers:dict, fix_nbs:dict)->dict:
    "{page: [why]} where a fix page's 'Where.' line differs from `answers` (every saved release and connector)."
    shown, out = where_verdicts(text), []
    for (rel, conn), a in answers.items():
        now = a.get(fix_nbs[fix], ('n/a', None))[0]
        if now == 'n/a': continue
        got = shown.get((rel, CONNECTORS[conn]), 'not said')
        if got != now: out.append(f'{rel} {CONNECTORS[conn]}: the page reads {got}, explain says {now}')
    return {page: out} if out else {}

def invariant_mismatches(rows:list, text:str)->dict:
    "{'index.html': [why]} where the results table's 'invariant held' column says no and the sentence under it says every run holds."
    col = rows[0].index('invariant held (fixed)') if 'invariant held (fixed)' in rows[0] else None
    if col is None: return {}
    no = [r[0] for r in rows[1:] if r[col].strip().lower().startswith('no')]
    says = re.search(r'every fixed run holds its invariant: (\w+)', text or '')
    if no and says and says.group(1).lower() == 'yes':
        return {'index.html': [f"'invariant held' reads no for {', '.join(no)}; the sentence under the table: every fixed run holds its invariant: yes"]}
    return {}

# The project's words: where a page uses one, the glossary must define it (the glossary term, the pattern of its uses).
VOCAB = {
    'P/D disaggregation': r'\bP/D\b', 'Backoff': r'\bbackoff\b', 'Lookahead': r'\blookahead\b', 'Truncation': r'\btruncat',
    'MTP': r'\bMTP\b', 'EAGLE': r'\bEAGLE\b', 'DFlash': r'\bDFlash\b', 'DSpark': r'\bDSpark\b', 'GDN': r'\bGDN\b',
    'Mamba': r'\bMamba\b', 'Hybrid model': r'\bhybrid\b', 'Sliding window': r'\bsliding[- ]window\b',
    'Acceptance length': r'\bacceptance length\b', 'Lossless': r'\blossless\b', 'Standalone': r'\bstandalone\b',
    'Census': r'\bcensus\b', 'Stale re-prefill': r'\bstale re-prefill\b|\bre-prefill', 'Reset on add': r'\breset on add\b',
    'Hidden-state hand-off': r'\bhand-?off\b', 'TPOT': r'\bTPOT\b', 'Model runner V2': r'\bmodel runner V2\b|\bV2 model runner\b',
    'text-attn': r'\btext-attn\b', 'text-hybrid': r'\btext-hybrid\b', 'Seed': r"\bthe seed(?:'s)?\b|\bseeds'", 'Mooncake': r'\bMooncake\b',
    'MoRI-IO': r'\bMoRI-IO\b', 'NIXL': r'\bNIXL\b', 'Lookahead block hashes': r'\blookahead block hash', 'KV connector': r'\bconnector\b',
    'Prefix cache': r'\bprefix[- ]cach', 'Spec-decode row': r'\bspec-decode row', 'Input-assembly kernel': r'\binput-assembly kernel\b',
    'Draft': r'\bdrafts?\b|\btaint', 'Legacy': r'\blegacy\b', 'Affected': r'\baffected\b', 'Plugin': r'\bplugin\b',
    'GSM8K': r'\bGSM8K\b', 'L': r'(?<![\w`])L(?![\w`])',
}
# Words a deployer reads without a glossary (acronyms of computing, tools and hosts).
COMMON = {'GPU', 'GPUs', 'CPU', 'CPUs', 'CUDA', 'PR', 'PRs', 'CI', 'GB', 'MB', 'KB', 'API', 'CLI', 'JSON', 'README', 'GitHub',
          'MkDocs', 'URL', 'HTTP', 'OK', 'NVIDIA', 'RDMA', 'NVLink', 'PyPI', 'ID', 'IDs', 'CPU-only', 'OS', 'RAM', 'ms', 'SVG',
          'PNG', 'HTML', 'JupyterLab', 'DeepSeek', 'AMD', 'LLM', 'GHz', 'TeX', 'KaTeX', 'PyTorch', 'NaN'}
_ACRONYM = re.compile(r'(?<![\w/.-])(?:[A-Z][a-z0-9]*[A-Z][A-Za-z0-9]*(?:-[A-Z][A-Za-z0-9]*)*|[A-Z]{2,}[A-Za-z0-9]*(?:-[A-Z][A-Za-z0-9]*)*)(?![\w])')  # MoRI-IO, TPOT; not ENV_VARS

def glossary_terms(headings:list)->set:
    "The terms a glossary's headings define ('Block, slot' -> block, slot; parentheses dropped), lower-cased."
    out = set()
    for h in headings:
        for t in re.split(r',\s*|\s+/\s+', re.sub(r'\s*\([^)]*\)', '', h.replace('¶', ''))):
            if t.strip(): out.add(t.strip().strip('`').lower())
    return out

def undefined_terms(text:str, codes:list, terms:set)->list:
    "The project's words, acronyms and one-letter code names (`L`) in `text` (and its inline `codes`) that `terms` lacks."
    missing = {t for t, pat in VOCAB.items() if t != 'L' and re.search(pat, text) and t.lower() not in terms}
    for w in set(_ACRONYM.findall(text)) - COMMON:
        base = w[:-1] if w.endswith('s') and w[:-1].isupper() else w
        parts = {base.lower(), base.lower().replace('-', ' '), base.split('-')[0].lower()}
        if not parts & terms and not any(t.lower() in terms for t, pat in VOCAB.items() if re.fullmatch(pat.replace(r'\b', ''), w)):
            missing.add(w)
    missing |= {c for c in codes if re.fullmatch(r'[A-Za-z]', c) and c.lower() not in terms}
    return sorted(missing)

_INDEX_INSTALL = re.compile(r'\bpip3? install (?:-[-\w]+ )*vllm[-_]pd[-_]spec\b(?![-\w./*])')

def failing_installs(text:str)->list:
    "The install lines in `text` that ask the package index for this package, which it is not on (a clone or `make wheel` installs it)."
    return sorted({m.group(0) for m in _INDEX_INSTALL.finditer(text or '')})

_NB_NAME = re.compile(r'^\d{2}[a-z]?_\w+(?:\.ipynb)?$|\.ipynb$')

def notebook_link_texts(texts:list)->list:
    "Link texts that are notebook file names (`09a_draft_groups`, `x.ipynb`): a reader wants the page's title."
    return sorted({t for t in texts if _NB_NAME.search(t.strip())})

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
