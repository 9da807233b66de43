"""MkDocs hooks for the site (named in mkdocs.yml under `hooks:`).

- Heading anchors as nbdev/Quarto (pandoc) make them, so `page.html#scheduler.schedule` from nbdev's symbol
  index and `#the-num_new_tokens-0-assertion`-style links resolve: `slugify`.
- Math typeset at build time: pymdownx.arithmatex marks `$...$` and `$$...$$`; KaTeX (from `make vendor`)
  renders them under node; the page links KaTeX's stylesheet and fonts from the site itself.
- Diagrams are SVG already (tools/prep_docs.py draws them when the site is built): no diagram library ships.
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
