"""MkDocs hooks for the site (named in mkdocs.yml under `hooks:`).

- Heading anchors as nbdev/Quarto (pandoc) make them, so `page.html#scheduler.schedule` from nbdev's symbol
  index and `#the-num_new_tokens-0-assertion`-style links resolve: `slugify`.
- Math typeset at build time: pymdownx.arithmatex marks `$...$` and `$$...$$`; KaTeX (from `make vendor`)
  renders them under node; the page links KaTeX's stylesheet and fonts from the site itself.
- Diagrams are SVG already (tools/prep_docs.py draws them when the site is built): no diagram library ships.
- Code lines keep their own span (pymdownx.highlight's `line_spans`: a wrapped line is indented, tools/extra.css)
  without its id, which nothing links to.
- Table cells get break opportunities where a name has parts (`cell_breaks`): the cells never break inside a word
  or a number (tools/extra.css), so a long snake_case, dotted or path name wraps at its parts instead.
- The vendored KaTeX stylesheet and fonts copied into `assets/vendor/`; source maps dropped (the site is read, not
  debugged).
"""
import html, json, re, shutil, subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT/'.cache'/'vendor'
KATEX_JS = VENDOR/'katex'/'katex.min.js'
_MATH = re.compile(r'<(span|div) class="arithmatex">\s*\\([(\[])(.*?)\\[)\]]\s*</\1>', re.S)

def slugify(value, separator='-'):
    "pandoc's identifier: lowercase; letters, digits, `_`, `-`, `.` kept; spaces to `-`; leading non-letters dropped."
    s = re.sub(r'[^\w\s.-]', '', html.unescape(value).strip().lower())
    s = re.sub(r'^[^a-z]+', '', re.sub(r'\s', separator, s))
    return s or 'section'

def on_config(config):
    config['mdx_configs'].setdefault('toc', {})['slugify'] = slugify
    return config

def _rel(page): return '../' * page.url.count('/')

def typeset(items):
    "HTML from KaTeX for each (tex, display) in `items`."
    if not KATEX_JS.exists(): raise RuntimeError(f'{KATEX_JS} is missing: run `make vendor` (python tools/vendor.py)')
    r = subprocess.run(['node', str(ROOT/'tools'/'katex_render.js'), str(KATEX_JS)], input=json.dumps(items),
                       capture_output=True, text=True)
    if r.returncode: raise RuntimeError(r.stderr.strip())
    return json.loads(r.stdout)

_CELL = re.compile(r'(<t[dh]\b[^>]*>)(.*?)(</t[dh]>)', re.S)
_TAG = re.compile(r'(<[^>]+>)')
_NAME_PART = re.compile(r'(?<=[A-Za-z0-9])_(?=[A-Za-z0-9])')                  # snake_case: after `_`
_CODE_PART = re.compile(r'(?<=[A-Za-z0-9_)\]])([./:]+)(?=[A-Za-z_])')          # vllm/v1/x.py:Cls.meth: after `/`, `.`, `:`

def cell_breaks(html_text):
    "HTML whose table cells may wrap after `_` in a name, and in code also after `/`, `.` and `:` between letters (`<wbr>`)."
    def cell(m):
        parts, code, out = _TAG.split(m.group(2)), 0, []
        for part in parts:
            if part.startswith('<'):
                tag = part[1:].split()[0].rstrip('>').lower() if len(part) > 2 else ''
                code += 1 if tag == 'code' else -1 if tag == '/code' else 0
                out.append(part); continue
            part = _NAME_PART.sub('_<wbr>', part)
            out.append(_CODE_PART.sub(r'\1<wbr>', part) if code > 0 else part)
        return m.group(1) + ''.join(out) + m.group(3)
    return _CELL.sub(cell, html_text)

_LINE_ID = re.compile(r'<span id="__span-\d+-\d+">')

def on_page_content(html_text, page, config, files):
    "Table cells with break points; code lines (pymdownx.highlight's `line_spans`) as plain spans, their ids dropped (bytes)."
    return _LINE_ID.sub('<span>', cell_breaks(html_text))

def on_post_page(output, page, config):
    head, rel = [], _rel(page)
    found = list(_MATH.finditer(output))
    if found:
        rendered = iter(typeset([[html.unescape(m.group(3)), m.group(2) == '['] for m in found]))
        output = _MATH.sub(lambda m: f'<{m.group(1)} class="math">{next(rendered)}</{m.group(1)}>', output)
        head.append(f'<link rel="stylesheet" href="{rel}assets/vendor/katex/katex.min.css">')
    if head: output = output.replace('</head>', '\n'.join(head) + '\n</head>', 1)
    return output

def on_post_build(config):
    site = Path(config['site_dir'])
    if (VENDOR/'katex').exists():
        shutil.copytree(VENDOR/'katex', site/'assets'/'vendor'/'katex', dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns('.*', 'katex.min.js'))
    for m in (site/'assets').rglob('*.map'): m.unlink()
