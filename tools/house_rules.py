"""What the notebooks and pages may not say: the project speaks of itself only.

`OUTSIDE_NAMES` is the list later content is held to (tests/test_notebook_rules.py over the notebooks,
tests/test_docs_site.py over the built pages). Known offenders wait in tests/content_offenders.json until the
content is fixed; a new one fails the tests, and so does an entry that no longer offends.
"""
import json, os, re
from pathlib import Path

OUTSIDE_NAMES = [  # (what it is, pattern, where: 'all' text or 'prose' only, i.e. without code and link targets)
    ('machine kind', r'(?i)\bnvidia-[a-z]\d{2,4}\w*', 'all'),
    ('machine kind', r'(?i)\b[a-z]\d{2,4}[- ]x\d\b|(?<=\w)-x[1-8]\b', 'all'),
    ('workplace file', r'\b(?:DESIGN|KINDS|RULES|MACHINES|contracts)\.md\b', 'all'),
    ('workplace path', r'\.\./s[h]ared\b|\bs[h]ared/(?:upstream|seeds)\b|/w[o]rk/\w|/t[m]p/v\d\d\b', 'all'),
    ("the project's own issue", r'(?i)\bissues? \d+\b|\bthe issue\b(?!\s*#)', 'all'),
    ('workplace role', r'(?i)\bthe (?:brief|lead)\b(?! time)', 'all'),
    ('internal name', r'\b(?:Engine|Experiment|Phase|Part|Stage) (?:I{1,3}|IV|V)\b', 'all'),
    ('notebook number', r'(?i)\bnotebooks? \d{2}[a-z]?\b|\bnbs/\d{2}[a-z]?\b|\b\d{2}[a-z]?_\w+\.ipynb\b', 'prose'),
]

BUILD_WORDS = [  # (what it is, pattern): a page's text (code and outputs included) tells the reader nothing of how it was built
    ('machine path', r'(?<![\w.~-])/(?:tmp|home|root|work|mnt|scratch|Users)/[\w.+-]+(?:/[\w.+-]+)*'),
    ('build log', r'(?i)\bwithout network\b|\bmerged tree\b|\bon (?:this|the) tree\b|\bdevice time left\b|\bwere cut at\b|\bthe machine\b'),
]

_TEMP_NAME = re.compile(r'(?<=/)tmp[\w-]{8}(?=/|$)')  # the random part `tempfile` gives a directory

def build_words(text):
    """Sorted distinct strings of `text` that are a machine's path or words from a build log (`BUILD_WORDS`); a
    temporary directory's random name reads `tmp*`, so that a known offender stays known when its page runs again."""
    return sorted({_TEMP_NAME.sub('tmp*', m.group(0)) for _, pat in BUILD_WORDS for m in re.finditer(pat, text or '')})

def prose(md):
    "Markdown without fenced code, inline code and link targets: what a reader reads as sentences."
    md = re.sub(r'(?ms)^\s*(`{3,}|~{3,}).*?^\s*\1', '', md)
    md = re.sub(r'(`+).+?\1', '', md)
    return re.sub(r'\]\([^)]*\)', ']', md)

def outside_names(text, prose_text=None):
    "Sorted distinct strings in `text` (and in `prose_text`, for prose-only patterns) that name the outside."
    found = set()
    for _, pat, where in OUTSIDE_NAMES:
        t = text if where == 'all' else (prose_text if prose_text is not None else prose(text))
        found |= {m.group(0) for m in re.finditer(pat, t)}
    return sorted(found)

def _text(x): return ''.join(x) if isinstance(x, list) else (x or '')

def notebook_text(nb_path):
    "(every source and output text of a notebook, its markdown prose)."
    cells = json.loads(Path(nb_path).read_text())['cells']
    allt, pr = [], []
    for c in cells:
        src = _text(c['source'])
        allt.append(src)
        if c['cell_type'] == 'markdown': pr.append(prose(src))
        for o in c.get('outputs', []):
            d = o.get('data', {})
            allt += [_text(o.get('text')), _text(d.get('text/plain')), _text(d.get('text/markdown')), _text(d.get('text/html'))]
            if 'text/markdown' in d: pr.append(prose(_text(d['text/markdown'])))
    return '\n'.join(allt), '\n'.join(pr)

OFFENDERS = Path(__file__).resolve().parents[1]/'tests'/'content_offenders.json'

def known_offenders(check):
    "{file: [offending strings]} allowed for now for `check` (tests/content_offenders.json)."
    return json.loads(OFFENDERS.read_text()).get(check, {}) if OFFENDERS.exists() else {}

def compare(check, found):
    "(new offenders, stale allow-list entries) of `found` {file: [strings]} against the allow-list."
    known = known_offenders(check)
    new = {f: sorted(set(v) - set(known.get(f, []))) for f, v in found.items()}
    stale = {f: sorted(set(v) - set(found.get(f, []))) for f, v in known.items()}
    return {f: v for f, v in new.items() if v}, {f: v for f, v in stale.items() if v}

def record(check, found):
    "Rewrite the allow-list of `check` to `found` (a content merge moves offenders; review the diff before committing)."
    d = json.loads(OFFENDERS.read_text()) if OFFENDERS.exists() else {}
    d[check] = {f: sorted(set(v)) for f, v in sorted(found.items()) if v}
    OFFENDERS.write_text(json.dumps(d, indent=1) + '\n')

def verdict(check, found):
    "An assertion message for `check`, or '' when `found` matches the allow-list exactly (`RECORD_OFFENDERS=1`: record it)."
    if os.environ.get('RECORD_OFFENDERS') == '1': record(check, found)
    new, stale = compare(check, found)
    msg = []
    if new: msg.append(f'{check}: new offenders (fix the content): {json.dumps(new, indent=1)}')
    if stale: msg.append(f'{check}: fixed, remove from tests/content_offenders.json: {json.dumps(stale, indent=1)}')
    return '\n'.join(msg)
