"""Turn nbdev's processed notebooks (`_proc/`, from `nbdev-proc-nbs`) into MkDocs markdown pages.

    python tools/prep_docs.py _proc _site_src               # page sources + generated mkdocs config
    python tools/prep_docs.py check nbs SITE_DIR            # fail if a notebook has no page in SITE_DIR
    python tools/prep_docs.py readme _proc/index.ipynb README.md

Quarto would apply the cell directives that nbdev leaves in `_proc/`; MkDocs does not know them, so this
step applies them and writes each notebook as a markdown page:

- the front-matter cell becomes the page title and its description the lead line;
- `show_doc` cells (`echo: false` + `output: asis`) become markdown API blocks;
- `#| exports` cells (nbdev marks them `code-fold: show`) show their source, highlighted, in an open
  "Exported source" block after their API block; `#| code-fold: true` folds a cell's source;
- `echo: false` hides a cell's code, `output: false` drops its outputs, `include: false` drops the cell;
- `#| moving-api: the batch helpers may change` puts a "May change" note above a cell whose API may change;
- outputs: markdown as markdown (tables become tables; a missing value reads "—"), HTML (DataFrames) as HTML, text
  as a preformatted block (a one-line Python literal wider than the column pretty-printed, `fit_output`; a
  line still wider wraps), images as files next to the page (at most `MAX_IMG_PX` wide, PNGs in 256 colours) with the cell's
  `#| fig-alt:` or the output's text as alt text, each a link to itself at full size (a phone reader zooms it);
- ```` ```mermaid ```` diagrams drawn to inline SVG now, by the pinned Mermaid in headless Chromium
  (`inline_diagrams`): no page loads a diagram library;
- links to notebooks (`06_guard_contract.ipynb#anchor`) point to their pages; upstream citations
  (`#55055`, `vllm/v1/...py`, commit hashes) become links to vLLM on GitHub (`cite_links`); a prose line
  that starts with `#` and a digit (`#54926 reports ...`) is linked or escaped, never a heading (and named
  on stderr: `hash_digit_lines`).

Pages are named as nbdev names them (`01_lookahead.ipynb` -> `lookahead.html`). The nav is one explicit map:
a deployer's path first (am I affected, the findings, explain, the audit, the plugin), the six fixes' pages and the
pages beyond the six by name (`NAV`, in that order; the package's registry, `vllm_pd_spec/registry.py`, lists them),
then every other notebook by its floor, the first digit of its number (`FLOORS`: the experiments, then the engine
and the kit), so a new notebook slots in by its number (tools/renumber.py names the floors). The home page's list of pages is the same map (`pages_list`).
"""
import ast, base64, html, io, json, pprint, re, shutil, sys, yaml
from nbdev.config import nbpath2html
from pathlib import Path
from urllib.parse import quote_plus

sys.path.append(str(Path(__file__).resolve().parents[1]))  # this tree's package, for its registry of fixes (pure data)
from vllm_pd_spec import registry  # noqa: E402

UPSTREAM = 'https://github.com/vllm-project/vllm'
UPSTREAM_TAG = 'v0.34.0'  # cited upstream files link to this release's tree (the newest audited release)
# A cited file the newest release removed links to the newest release that had it: {path: tag}, computed from the
# released sources (`python tools/prep_docs.py removed nbs SRC` over SRC/<version>/vllm/...), never typed in.
REMOVED_FILES = Path(__file__).with_name('upstream_removed.json')
_REMOVED = json.loads(REMOVED_FILES.read_text()) if REMOVED_FILES.exists() else {}
MAX_IMG_PX = 1600         # twice the content column: sharp on a high-density screen, no larger

_FIX_NBS, _BEYOND_NBS = registry.nav_pages()  # the fixes' pages and those beyond the six, in the registry's order
FIXES = [nbpath2html(nb).stem for nb in _FIX_NBS]  # the six fixes' pages, fix 1 to fix 6
AFFECTED = ('Am I affected?', 'index.html#if-you-run-pd-with-a-drafter')  # the home page's table, first in the nav
NAV = [  # (nav section, its pages by name: the notebook's name without its number, or `AFFECTED`), first, in this order
    ('If you deploy P/D with a drafter', [AFFECTED, 'findings', 'explain', 'audit', 'plugin', 'use', 'glossary']),
    ('The six fixes', ['pd_meets_spec', *FIXES]),
    ('Beyond the six', [nbpath2html(nb).stem for nb in _BEYOND_NBS]),
]
FLOORS = [  # (nav section, the first digit of the notebook's number) for every other numbered notebook: the fixes'
    ('Experiments', '5'),                 # experiments, then the engine and the kit a reader of the code goes to
    ('Experiments', '6'),
    ('Engine', '3'),
    ("Experiments' kit", '4'),
    ('Config and contracts', '0'),
    ('Model', '1'),
    ('Kernels', '2'),
    ('Audit harness and probes', '7'),
    ('Command line', '8'),
    ('Findings and use', '9'),
]
SECTIONS = list(dict.fromkeys([s for s, _ in NAV] + [s for s, _ in FLOORS]))  # the nav's sections, in order
API = ('API index', 'api.html')  # a page made from nbdev's symbol index (`api_page`), last in the nav

_DIRECTIVE = re.compile(r'^\s*#\|\s*([\w-]+)\s*:?\s*(.*)$')
_ANSI = re.compile(r'\x1B(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])')

def split_directives(src):
    "(directives dict, source without its leading `#|` lines)."
    lines, d = src.splitlines(), {}
    while lines and _DIRECTIVE.match(lines[0]):
        k, v = _DIRECTIVE.match(lines.pop(0)).groups()
        d[k] = v.strip().strip('"\'') or True
    return d, '\n'.join(lines)

def _text(x): return ''.join(x) if isinstance(x, list) else x

def _false(d, k): return str(d.get(k)).lower() == 'false'

# ---- links ----

def page_stem(nb_name):
    "A notebook's page name without extension (`36_runner.ipynb` -> `runner`), as nbdev names its page."
    return nbpath2html(Path(nb_name).with_suffix('.ipynb').name).stem

def section(nb_name):
    "The nav section of a notebook: by name (`NAV`), else by its floor (`FLOORS`); None for unnumbered notebooks."
    m = re.match(r'(\d)\d*[a-z]?_', Path(nb_name).name)
    if not m: return None
    named = next((s for s, pages in NAV if page_stem(nb_name) in pages), None)
    return named or next(s for s, digit in FLOORS if m.group(1) == digit)

def _nav_key(nb_name):
    "Sort key of a notebook within its section: a named page by its place in `NAV`, other pages by file name."
    pages = next((pages for s, pages in NAV if page_stem(nb_name) in pages), None)
    return (pages.index(page_stem(nb_name)) if pages else 0, nb_name)

def nav_order(nb_names:list)->list:
    """[(section, [entry])] of the site's nav for notebook file names, in order: an entry is a notebook's name, or
    `AFFECTED` (a link into the home page); the home page itself (unnumbered) is not in a section."""
    groups = {}
    for n in sorted(nb_names, key=_nav_key):
        if section(n): groups.setdefault(section(n), []).append(n)
    for sec, pages in NAV:  # links into a page sit where NAV puts them
        for i, p in enumerate(pages):
            if isinstance(p, tuple) and sec in groups: groups[sec].insert(i, p)
    return [(s, groups[s]) for s in SECTIONS if s in groups] + [('Reference', [API])]

def title_of(nb:dict, name:str)->str:
    "A notebook's title: its front matter's, else its first `# ` heading, else its name."
    for c in nb['cells']:
        src = _text(c['source'])
        if c['cell_type'] == 'raw' and src.startswith('---'): return (yaml.safe_load(src.strip().strip('-')) or {}).get('title', name)
        m = re.match(r'#\s+(.+)', src.strip()) if c['cell_type'] == 'markdown' else None
        if m: return m.group(1).strip()
    return name

def pages_list(nbs_dir, ext:str='.html')->str:
    "The home page's list of pages, in the nav's order (`nav_order`): one bullet per section, its pages' titles linked."
    nbs = {p.name: p for p in Path(nbs_dir).glob('*.ipynb')}
    out = []
    for sec, entries in nav_order(list(nbs)):
        links = [f'[{t}]({u.replace(".html", ext) if not u.startswith("index") else "#" + u.split("#")[1]})' if isinstance(e, tuple) else
                 f'[{nav_title(title_of(json.loads(nbs[e].read_text()), e), e)}]({Path(page_name(e)).stem}{ext})'
                 for e in entries for t, u in [e if isinstance(e, tuple) else (None, None)]]
        out.append(f'- **{sec}**: ' + ' · '.join(links))
    return '\n'.join(out)

def page_name(nb_path):
    "nbdev's html name for a notebook (`nbdev.config.nbpath2html`), as a notebook file name."
    return nbpath2html(nb_path).with_suffix('.ipynb').name

def own_links(md, ext='.md'):
    "Point links to notebooks (`06_guard_contract.ipynb#x`) and pages (`guard_contract.html#x`) at page sources."
    md = re.sub(r'\]\((?!https?:)([\w./-]*?)([\w-]+)\.ipynb(#[^)\s]*)?\)',
                lambda m: f'](' + Path(page_name(m.group(2)+'.ipynb')).stem + ext + (m.group(3) or '') + ')', md)
    return re.sub(r'\]\(([\w-]+)\.html(#[^)\s]*)?\)', lambda m: f']({m.group(1)}{ext}{m.group(2) or ""})', md)

_FILE = re.compile(r'^vllm/[\w./-]*[\w/]$')
_SHA = re.compile(r'^(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}$')
_REF = re.compile(r'(?<![\w/#&\[])#(\d{3,6})\b')
_PLAIN_SHA = re.compile(r'(\bcommits? )((?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40})\b')
_SPANS = re.compile(r'(`+)(.+?)\1|\[[^\]\n]*\]\([^)\s]*\)|<[^>\n]+>|https?://\S+', re.S)

def upstream_url(ref, context=''):
    "The GitHub URL of an upstream citation: a PR/issue number, a `vllm/...` path or a commit hash."
    if _FILE.match(ref): return f"{UPSTREAM}/{'tree' if ref.endswith('/') else 'blob'}/{_REMOVED.get(ref, UPSTREAM_TAG)}/{ref}"
    if _SHA.match(ref): return f'{UPSTREAM}/commit/{ref}'
    repo = UPSTREAM + ('-ascend' if re.search(r'vllm-ascend[^.;:]*$', context) else '')
    kind = 'issues' if re.search(r'issues?\W*$', context, re.I) else 'pull'
    return f'{repo}/{kind}/{ref}'

def _cite_plain(txt):
    txt = _REF.sub(lambda m: f'[#{m.group(1)}]({upstream_url(m.group(1), txt[max(0, m.start()-80):m.start()])})', txt)
    return _PLAIN_SHA.sub(lambda m: f'{m.group(1)}[`{m.group(2)}`]({upstream_url(m.group(2))})', txt)

def _cite_line(line):
    out, i = [], 0
    for m in _SPANS.finditer(line):
        out.append(_cite_plain(line[i:m.start()]))
        code = m.group(2) if m.group(1) else None
        ref = code.strip().rstrip('…') if code else None  # `73ee90a0…`: an abbreviated hash
        if ref and (_FILE.match(ref) or _SHA.match(ref)): out.append(f'[{m.group(0)}]({upstream_url(ref)})')
        else: out.append(m.group(0))
        i = m.end()
    return ''.join(out) + _cite_plain(line[i:])

def cite_links(md):
    "Markdown with upstream citations linked: `#55055`, `` `vllm/v1/request.py` ``, `` `73ee90a0` ``, commit 73ee90a0."
    out, fence = [], None
    for line in md.split('\n'):
        f = re.match(r'\s*(`{3,}|~{3,})', line)
        if fence: fence = None if f and f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence) else fence
        elif f: fence = f.group(1)
        elif _HASH_DIGIT.match(line):  # prose that starts with a PR number is no heading: linked, or `\#`
            line = _cite_line(line)
            if line.startswith('#'): line = '\\' + line
        elif not line.startswith(('    ', '#')): line = _cite_line(line)
        out.append(line)
    return '\n'.join(out)

_HASH_DIGIT = re.compile(r'#\d')

def hash_digit_lines(md):
    "Lines of markdown `md` (outside code fences) that start with `#` and a digit: prose a renderer takes for a heading."
    out, fence = [], None
    for line in md.split('\n'):
        f = re.match(r'\s*(`{3,}|~{3,})', line)
        if fence: fence = None if f and f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence) else fence
        elif f: fence = f.group(1)
        elif _HASH_DIGIT.match(line): out.append(line)
    return out

def md_links(md): return cite_links(own_links(md))

# ---- cells ----

def _fence(src, lang='', cls=''):
    "A fenced code block that no backtick run inside `src` can close."
    ticks = '`' * max(3, 1 + max((len(t) for t in re.findall(r'`+', src)), default=0))
    attrs = f'{{ .{lang or "text"} {cls} }}' if cls else lang
    return f'{ticks}{attrs}\n{src.rstrip()}\n{ticks}\n'

def _indent(s, n=4): return '\n'.join((' ' * n + l) if l.strip() else '' for l in s.split('\n'))

class Page:
    "Markdown of one page, and its image files."
    def __init__(self, name): self.name, self.images, self.missing_alt = name, {}, []

    def image(self, data, ext, alt, width=None):
        "Markdown for an image output, its file written under `img/` (scaled to `MAX_IMG_PX`)."
        raw = base64.b64decode(_text(data)) if ext == 'png' else _text(data).encode()
        if ext == 'png': raw, width = _fit_png(raw, width)
        fn = f'img/{Path(self.name).stem}-{len(self.images)+1}.{ext}'
        self.images[fn] = raw
        if not alt: self.missing_alt.append(fn)
        w, a = f' width="{width}"' if width else '', html.escape(alt or "figure", quote=True)
        return (f'<a class="nb-zoom" href="{fn}" title="The figure at full size">'  # a tap on a phone opens it, to zoom
                f'<img class="nb-figure" src="{fn}" alt="{a}"{w} loading="lazy"></a>\n')

    def output(self, o, alt=None):
        "Markdown for one output."
        t, d = o.get('output_type'), o.get('data', {})
        if t == 'stream':
            txt, wrap = fit_output(_ANSI.sub('', _text(o['text'])))
            cls = '.nb-output' + (' .nb-stderr' if o.get('name') == 'stderr' else '') + (' .nb-wrap' if wrap else '')
            return _fence(txt, cls=cls)
        if t == 'error': return _fence(_ANSI.sub('', '\n'.join(o.get('traceback', []))), cls='.nb-output .nb-error')
        plain, meta = _text(d.get('text/plain', '')), o.get('metadata', {})
        for mime, ext in (('image/svg+xml', 'svg'), ('image/png', 'png')):
            if mime not in d: continue
            m = meta.get(mime) or {}  # the image's alt: the cell's `fig-alt`, its metadata's, or its text unless a repr
            fig_alt = alt or m.get('alt') or (plain.strip() if plain.strip() and not plain.startswith('<') else None)
            return self.image(d[mime], ext, fig_alt, m.get('width'))
        if 'text/markdown' in d: return md_links(header_breaks(turn_wide_tables(dash_missing(_text(d['text/markdown']))))) + '\n'
        if 'text/html' in d:
            body = '\n'.join(l for l in dash_missing_html(_text(d['text/html'])).split('\n') if l.strip())
            return f'<div class="nb-html" markdown="0">\n{body}\n</div>\n'
        if plain:
            txt, wrap = fit_output(_ANSI.sub('', plain))
            return _fence(txt, cls='.nb-output' + (' .nb-wrap' if wrap else ''))
        return ''

    def cell(self, cell):
        "(markdown for `cell`, front matter or None)."
        src = _text(cell['source'])
        if cell['cell_type'] == 'raw' and src.startswith('---'):
            fm = yaml.safe_load(src.strip().strip('-')) or {}
            out = f"# {fm.get('title', '')}\n"
            if fm.get('description'): out += f"\n{md_links(fm['description'])}\n{{: .nb-lead }}\n"
            return out, fm
        if cell['cell_type'] == 'markdown':
            return ('' if src.strip().startswith('<!-- WARNING: THIS FILE WAS AUTOGENERATED') else md_links(src) + '\n'), None
        if cell['cell_type'] != 'code': return '', None
        d, body = split_directives(src)
        if _false(d, 'include') or 'hide' in d: return '', None
        outs = [] if _false(d, 'output') else cell.get('outputs', [])
        alt = d.get('fig-alt') if isinstance(d.get('fig-alt'), str) else None
        shown = '\n'.join(self.output(o, alt) for o in outs)  # a blank line between outputs: a table after printed text stays a table
        if d.get('output') == 'asis' and _false(d, 'echo'): return shown, None
        code = '' if _false(d, 'echo') or not body.strip() else _fence(body, 'python')
        if code and 'moving-api' in d:  # `#| moving-api: what may change`: a note above the cell
            why = d['moving-api'] if isinstance(d['moving-api'], str) else 'this cell uses an API that may still change'
            code = f'!!! note "May change"\n\n{_indent(md_links(why[0].upper() + why[1:]) + ".")}\n\n' + code
        if code and 'code-fold' in d:
            summary = d.get('code-summary') if isinstance(d.get('code-summary'), str) else 'Source'
            code = f'???{"+" if d["code-fold"] == "show" else ""} source "{summary}"\n\n{_indent(code)}\n'
        return code + ('\n' if code and shown else '') + shown, None

# ---- outputs a reader can read in the column ----

OUTPUT_COLS = 92  # characters of a printed output line that fit the content column at 1,280 px (7.1 px each)
MISSING = ('None', 'NaN', 'nan', '<NA>', '&lt;NA&gt;')  # what a table shows for a missing value; the page shows "—"
_MD_MISSING = re.compile(r'(?<=\|)[ \t]*(?:' + '|'.join(map(re.escape, MISSING)) + r')[ \t]*(?=\|)')
_HTML_MISSING = re.compile(r'(<td\b[^>]*>)\s*(?:' + '|'.join(map(re.escape, MISSING)) + r')\s*(</td>)')

def dash_missing(md):
    "Markdown with every table cell that reads None/NaN/<NA> reading \"—\" (a missing value, as readers write it)."
    return '\n'.join(_MD_MISSING.sub(' — ', l) if l.lstrip().startswith('|') else l for l in md.split('\n'))

_SEP_ROW = re.compile(r'^\s*\|?\s*:?-{3,}')
_CODE_SPAN = re.compile(r'(`+).+?\1|\]\([^)]*\)')  # a code span, or a link's target: neither gets a break

def _wbr(text):
    "`text` with a break opportunity after each `_` outside code spans and link targets (snake_case headers wrap at their parts)."
    out, i = [], 0
    for m in _CODE_SPAN.finditer(text):
        out += [text[i:m.start()].replace('_', '_<wbr>'), m.group(0)]; i = m.end()
    return ''.join(out) + text[i:].replace('_', '_<wbr>')

def header_breaks(md):
    "Markdown whose tables' header rows may wrap after `_`, so a table of snake_case columns fits the column."
    lines = md.split('\n')
    return '\n'.join(_wbr(l) if l.lstrip().startswith('|') and i + 1 < len(lines) and _SEP_ROW.match(lines[i + 1])
                     else l for i, l in enumerate(lines))

WIDE_COLS, SHORT_ROWS = 10, 8  # a markdown table of more columns and at most this many rows is shown turned

def _cells(line): return [c.strip() for c in re.split(r'(?<!\\)\|', line.strip().strip('|'))]

def _transpose(rows):
    "A table (header first) as columns: the first row is named by the columns that tell its rows apart."
    head, body = rows[0], rows[1:]
    k = next((k for k in range(1, len(head)) if len({tuple(r[:k]) for r in body}) == len(body)), len(head))
    names = [', '.join([r[0]] + [f'{h} {v}' for h, v in zip(head[1:k], r[1:k])]) for r in body]
    cols = [[head[0] if k == 1 else ', '.join(head[:k])] + names] + [[h] + [r[j] for r in body] for j, h in enumerate(head) if j >= k]
    return cols

def turn_wide_tables(md):
    "Markdown with each short table of more than `WIDE_COLS` columns turned (one row per column), so it fits the column."
    lines, out, i = md.split('\n'), [], 0
    while i < len(lines):
        if lines[i].lstrip().startswith('|') and i + 1 < len(lines) and _SEP_ROW.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith('|'): j += 1
            rows = [_cells(lines[i])] + [_cells(l) for l in lines[i + 2:j]]
            if len(rows[0]) > WIDE_COLS and len(rows) - 1 <= SHORT_ROWS and all(len(r) == len(rows[0]) for r in rows):
                t = _transpose(rows)
                out += ['| ' + ' | '.join(t[0]) + ' |', '|' + '---|' * len(t[0])] + ['| ' + ' | '.join(r) + ' |' for r in t[1:]]
            else: out += lines[i:j]
            i = j
        else: out.append(lines[i]); i += 1
    return '\n'.join(out)

def dash_missing_html(h):
    "HTML (a DataFrame's table): every cell that reads None/NaN/<NA> reads \"—\"; headers may wrap after `_`."
    h = re.sub(r'(<th\b[^>]*>)([^<]*)(</th>)', lambda m: m.group(1) + m.group(2).replace('_', '_<wbr>') + m.group(3), h)
    return _HTML_MISSING.sub(r'\1—\2', h)

def _pretty(line, cols=OUTPUT_COLS):
    "A long printed line that is a Python literal (after an optional `label: ` or `label = `), pretty-printed."
    m = re.match(r'^(\s*(?:[\w .-]{0,40}?(?::|=)\s*)?)([\[{(].*[\]})])\s*$', line)
    if not m: return line
    try: value = ast.literal_eval(m.group(2))
    except (ValueError, SyntaxError, MemoryError, RecursionError): return line
    lead = m.group(1)
    body = pprint.pformat(value, width=max(40, cols - len(lead)), sort_dicts=False, compact=True)
    if len(lead) + len(body.split('\n')[0]) <= cols: return lead + body.replace('\n', '\n' + ' ' * len(lead))
    return lead.rstrip() + '\n' + pprint.pformat(value, width=cols, sort_dicts=False, compact=True)

def fit_output(text, cols=OUTPUT_COLS):
    "(`text` with over-long literal lines pretty-printed, whether a line is still wider than `cols` (the page wraps it))."
    out = '\n'.join(_pretty(l, cols) if len(l) > cols else l for l in text.split('\n'))
    return out, max(map(len, out.split('\n'))) > cols

def _fit_png(raw, width):
    """PNG bytes no wider than `MAX_IMG_PX` (downscaled with Pillow), in 256 colours (a plot's flat colours and their
    antialiasing fit them; the file is about a quarter the size), and the display width to give it."""
    from PIL import Image
    im = Image.open(io.BytesIO(raw))
    if im.width > MAX_IMG_PX:
        im, width = im.resize((MAX_IMG_PX, round(im.height * MAX_IMG_PX / im.width)), Image.LANCZOS), \
                    round(float(width) * MAX_IMG_PX / im.width) if width else None
    buf = io.BytesIO()
    im.convert('RGB').quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(buf, 'PNG', optimize=True)
    return (buf.getvalue() if len(buf.getvalue()) < len(raw) else raw), width

def nb_page(nb, name):
    "(Page, markdown, title) for a processed notebook `nb` published as `name` (`lookahead.md`)."
    page, parts, title = Page(name), [], None
    for c in nb['cells']:
        md, fm = page.cell(c)
        if fm: title = fm.get('title')
        if md.strip(): parts.append(md)
    return page, '\n'.join(parts), title

# ---- every symbol: its source and an issue link; the API index ----

ROOT = Path(__file__).resolve().parents[1]

def symbols()->dict:
    "nbdev's symbol index (`vllm_pd_spec/_modidx.py`): {module: {qualified name: (page#anchor, source file)}}, and its settings."
    return ast.literal_eval((ROOT/'vllm_pd_spec'/'_modidx.py').read_text().split('=', 1)[1])

def _line(path:str, name:str)->int|None:
    "The line of `path` that defines `name` (its last dotted part: a def, a class or an assignment), or None."
    last = name.split('.')[-1]
    pat = re.compile(rf'^\s*(?:async\s+def|def|class)\s+{re.escape(last)}\b|^{re.escape(last)}\s*[:=]')
    try: lines = (ROOT/path).read_text().splitlines()
    except OSError: return None
    return next((i for i, l in enumerate(lines, 1) if pat.match(l)), None)

def symbol_links()->dict:
    "{(page stem, heading anchor): markdown links to the symbol's source and to a new issue about it}."
    idx = symbols(); git = idx['settings']['git_url']; branch = idx['settings'].get('branch', 'main')
    out = {}
    for syms in idx['syms'].values():
        for qual, (doc, path) in syms.items():
            page, _, anchor = doc.partition('#')
            n = _line(path, qual)
            title = quote_plus(f'{qual}: ')
            out[(Path(page).stem, anchor)] = (f'[source]({git}/blob/{branch}/{path}' + (f'#L{n}' if n else '') + ')'
                                              f' · [report an issue]({git}/issues/new?title={title})')
    return out

def add_symbol_links(md:str, page:str, links:dict)->str:
    "Markdown whose API headings (`### name`, from `show_doc`) are followed by the symbol's source and issue links."
    def one(m):
        from mkdocs_hooks import slugify
        got = links.get((page, slugify(m.group(1).replace('`', ''))))
        return m.group(0) + (f'\n\n{got}\n{{: .nb-symbol }}' if got else '')
    return re.sub(r'^#{3,4} (\S+)$', one, md, flags=re.M)

def headings(md:str)->set:
    "The anchors of a page's API headings (`### name`, as `show_doc` writes them)."
    from mkdocs_hooks import slugify
    return {slugify(m.group(1).replace('`', '')) for m in re.finditer(r'^#{3,4} (\S+)$', md, re.M)}

def api_page(documented:set)->str:
    "The API index: every public name of the package that a page documents (`documented`: (page stem, anchor)), by module."
    out = ['# API index', '', 'Every public name of the package, by module, linked to the page that documents it (from nbdev\'s',
           'symbol index); each entry there links its source and a new issue about it.', '{: .nb-lead }', '']
    for mod, syms in sorted(symbols()['syms'].items()):
        names = [(q[len(mod) + 1:], doc) for q, (doc, _) in syms.items()
                 if not q.split('.')[-1].startswith('_') and (Path(doc.split('#')[0]).stem, doc.partition('#')[2]) in documented]
        if names: out += [f'## `{mod}`', '', ' · '.join(f'[`{n}`]({own_links(f"]({d})")[2:-1]})' for n, d in names), '']
    return '\n'.join(out)

# ---- diagrams, drawn when the site is built ----

MERMAID_JS = Path(__file__).resolve().parents[1]/'.cache'/'vendor'/'mermaid'/'mermaid.min.js'  # `make vendor`
_MERMAID = re.compile(r'^(`{3,})mermaid[ \t]*\n(.*?)\n\1[ \t]*$', re.M | re.S)
_DRAW = """<!doctype html><html><body><script src="%s"></script><script>
mermaid.initialize({startOnLoad: false, theme: 'neutral', securityLevel: 'strict', fontFamily: 'sans-serif'});
window.draw = async items => { const out = [];
  for (const [id, src] of items) out.push((await mermaid.render(id, src)).svg);
  return out; };
</script></body></html>"""

def draw_diagrams(items):
    "SVG markup for each (id, Mermaid source) in `items`: Mermaid run once in headless Chromium (tools/cdp.py)."
    if not items: return []
    if not MERMAID_JS.exists(): raise RuntimeError(f'{MERMAID_JS} is missing: run `make vendor` (python tools/vendor.py)')
    import tempfile, cdp
    with tempfile.TemporaryDirectory() as tmp, cdp.Browser() as b:
        page = Path(tmp)/'draw.html'
        page.write_text(_DRAW % MERMAID_JS.as_uri())
        tab = b.tab()
        tab.goto(page.as_uri(), settle=0)
        return tab.eval(f'window.draw({json.dumps(items)})')

def inline_diagrams(pages):
    "{name: markdown} with each ```mermaid fence replaced by its SVG, drawn now, so no page loads a diagram library."
    found = [(name, m) for name, md in pages.items() for m in _MERMAID.finditer(md)]
    ids = [f'diagram-{Path(name).stem}-{i}' for i, (name, _) in enumerate(found)]
    svgs = iter(draw_diagrams([[i, m.group(2)] for i, (_, m) in zip(ids, found)]))
    def svg(m): return '<div class="diagram" markdown="0">\n' + re.sub(r'\s*\n\s*', ' ', next(svgs)) + '\n</div>'
    return {name: _MERMAID.sub(svg, md) for name, md in pages.items()}

def nav_title(title, name):
    "A nav entry's title: the page title without markdown code marks."
    return (title or name).replace('`', '')

def prep(src_dir, dst_dir):
    "Write the markdown pages, their images and a generated mkdocs config; returns the nav."
    src_dir, dst_dir = Path(src_dir), Path(dst_dir)
    pages = dst_dir/'pages'
    shutil.rmtree(pages, ignore_errors=True)
    (pages/'img').mkdir(parents=True)
    entries, mds = {}, {}
    for p in sorted(src_dir.glob('*.ipynb')):
        name = Path(page_name(p)).with_suffix('.md').name
        nb = json.loads(p.read_text())
        page, mds[name], title = nb_page(nb, name)
        for line in (l for c in nb['cells'] if c['cell_type'] == 'markdown' for l in hash_digit_lines(_text(c['source']))):
            print(f'{p.name}: a line starts with # and a digit (shown as prose, not a heading): {line[:60]!r}', file=sys.stderr)
        for fn, raw in page.images.items(): (pages/fn).write_bytes(raw)
        entries[p.name] = {('Overview' if name == 'index.md' else nav_title(title, name[:-3])): name}
    nav = [e for n, e in entries.items() if section(n) is None]
    link = lambda t, u: {t: u[:-len('.html')] + '.md' if (t, u) == API else u}  # the API index is a page of the site
    nav += [{sec: [link(*e) if isinstance(e, tuple) else entries[e] for e in es]} for sec, es in nav_order(list(entries))]

    links = symbol_links()
    for name, md in inline_diagrams(mds).items(): (pages/name).write_text(add_symbol_links(md, name[:-3], links))
    (pages/'api.md').write_text(api_page({(name[:-3], a) for name, md in mds.items() for a in headings(md)}))
    shutil.copy(Path(__file__).parent/'extra.css', pages/'extra.css')
    cfg = {'INHERIT': str(Path('mkdocs.yml').resolve()), 'docs_dir': str(pages.resolve()), 'nav': nav,
           'extra_css': ['extra.css'], 'hooks': [str(Path(__file__).resolve().parent/'mkdocs_hooks.py')],
           'theme': {'name': 'material', 'custom_dir': str(Path(__file__).resolve().parent/'overrides')}}
    (dst_dir/'mkdocs.yml').write_text(yaml.safe_dump(cfg, sort_keys=False))
    return nav

def check(nbs_dir, site_dir):
    "Names of the notebooks in `nbs_dir` that have no html page in `site_dir`."
    return [p.name for p in sorted(Path(nbs_dir).glob('*.ipynb'))
            if not (Path(site_dir)/page_name(p).replace('.ipynb', '.html')).exists()]

# ---- README ----

def _out_text(o):
    if o.get('output_type') == 'stream': return _text(o['text'])
    d = o.get('data', {})
    return _text(d.get('text/markdown') or d.get('text/plain') or '')

def readme(index_nb, dst):
    "Write README markdown from the processed index notebook."
    out = ['<!-- Generated from nbs/index.ipynb by `make docs`: edit the notebook, not this file. -->\n']
    for c in json.loads(Path(index_nb).read_text())['cells']:
        src = _text(c['source'])
        if c['cell_type'] == 'raw' and src.startswith('---'):
            fm = yaml.safe_load(src.strip().strip('-')) or {}
            out.append(f"# {fm.get('title', '')}\n" + (f"\n> {fm['description']}\n" if fm.get('description') else '') + '\n')
            continue
        if c['cell_type'] == 'markdown':
            if not src.strip().startswith('<!-- WARNING'): out.append(own_links(src, '.html') + '\n')
            continue
        if c['cell_type'] != 'code': continue
        d, body = split_directives(src)
        if _false(d, 'include') or 'hide' in d: continue
        if not _false(d, 'echo') and body.strip(): out.append(f'```python\n{body}\n```\n')
        for o in ([] if _false(d, 'output') else c.get('outputs', [])):  # markdown as markdown, printed text as a block
            txt = _out_text(o).rstrip()
            if txt: out.append(own_links(txt, '.html') + '\n' if 'text/markdown' in o.get('data', {}) else f'```\n{txt}\n```\n')
    md = re.sub(r'\]\((?!https?:|#|/)([\w./-]+\.html)', r'](docs/\1', '\n'.join(out))
    Path(dst).write_text(md)

def removed_files(nbs_dir, src_dir)->dict:
    "{cited `vllm/...` path: 'vX.Y.Z'} for each path the notebooks cite that UPSTREAM_TAG's sources lack, the newest release that has it."
    src = Path(src_dir)
    rels = sorted((d.name for d in src.iterdir() if (d/'vllm').is_dir()), key=lambda v: tuple(map(int, v.split('.'))))
    newest = UPSTREAM_TAG[1:]
    assert newest in rels, f'{src_dir}: no sources of {newest} (UPSTREAM_TAG)'
    cited = {m.group(1) for nb in sorted(Path(nbs_dir).glob('*.ipynb'))
             for m in re.finditer(r'`(vllm/[\w./-]*[\w/])`', Path(nb).read_text())}
    out = {}
    for ref in sorted(cited):
        if (src/newest/ref).exists(): continue
        had = [v for v in rels if (src/v/ref).exists()]
        if had: out[ref] = 'v' + had[-1]
    return out

if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == 'removed':
        REMOVED_FILES.write_text(json.dumps(removed_files(sys.argv[2], sys.argv[3]), indent=1, sort_keys=True) + '\n')
        print(f'{REMOVED_FILES.name}: {len(json.loads(REMOVED_FILES.read_text()))} cited files removed in {UPSTREAM_TAG}')
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == 'check':
        missing = check(sys.argv[2], sys.argv[3])
        if missing: sys.exit(f"no docs page for: {', '.join(missing)}")
        print(f"every notebook in {sys.argv[2]} has a page in {sys.argv[3]}")
    elif len(sys.argv) == 4 and sys.argv[1] == 'readme': readme(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3:
        for item in prep(*sys.argv[1:]): print(*item.items())
    else: sys.exit(__doc__)
