"""The built site, read as files: links and anchors, typeset math, size, names from outside the project, and the
prep step's conversions. `DOCS_DIR` picks the site (default: the committed `docs/`); `make test` builds a fresh one."""
import json, os, re, sys
from pathlib import Path
import pytest
from nbdev.config import nbpath2html

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import check_site, house_rules, prep_docs  # noqa: E402

DOCS = Path(os.environ.get('DOCS_DIR') or ROOT/'docs')
NOTEBOOKS = sorted((ROOT/'nbs').glob('*.ipynb'))
needs_site = pytest.mark.skipif(not (DOCS/'index.html').exists(), reason=f'no site at {DOCS} (`make docs`)')

@needs_site
def test_every_link_and_anchor_resolves():
    bad = check_site.broken_links(DOCS)
    assert bad == [], f'{len(bad)} broken links (page, link, why): {bad[:20]}'

@needs_site
def test_no_untypeset_math():
    assert check_site.untypeset_math(DOCS) == {}

@needs_site
def test_site_is_small():
    assert check_site.site_bytes(DOCS) <= check_site.MAX_SITE_BYTES

@needs_site
def test_math_ships_with_the_site_and_diagrams_are_drawn():
    "KaTeX's stylesheet and fonts ship; diagrams are inline SVG, so no page loads a diagram library (or megabytes)."
    assert (DOCS/'assets/vendor/katex/katex.min.css').exists() and list((DOCS/'assets/vendor/katex/fonts').glob('*.woff2'))
    assert not (DOCS/'assets/vendor/mermaid').exists()
    page = (DOCS/nbpath2html('90_pd_meets_spec.ipynb').name).read_text()
    assert '<div class="diagram"' in page and '<svg id="diagram-' in page and 'class="mermaid"' not in page
    heavy = {p.name: p.stat().st_size for p in DOCS.rglob('*') if p.is_file() and p.suffix in ('.js', '.css', '.html')
             and p.stat().st_size > 1_500_000}
    assert heavy == {}, f'page files over 1.5 MB: {heavy}'

@needs_site
def test_header_fetches_no_repository_facts():
    "Material's repository widget asks a web API for stars and forks; the site's header link is a plain link."
    html = (DOCS/'index.html').read_text()
    assert 'class="md-source"' in html and 'data-md-component="source"' not in html

@needs_site
def test_pages_name_nothing_outside_the_project():
    page_nb = {nbpath2html(nb).name: nb.name for nb in NOTEBOOKS}
    found = {}
    for page, (text, prose) in check_site.page_texts(DOCS).items():
        names = house_rules.outside_names(text, prose)
        if names: found[page_nb.get(page, page)] = names
    msg = house_rules.verdict('outside_names_pages', found)
    assert not msg, msg

@needs_site
def test_no_page_tells_an_install_that_fails():
    "The package is not on the package index: a page or the README that says `pip install vllm-pd-spec` sends a reader to an error."
    found = {page: check_site.failing_installs(text) for page, (text, _) in check_site.page_texts(DOCS).items()}
    found['README.md'] = check_site.failing_installs((ROOT/'README.md').read_text())
    msg = house_rules.verdict('failing_install_lines', {p: v for p, v in found.items() if v})
    assert not msg, msg

def test_the_install_check_finds_an_index_install_only():
    assert check_site.failing_installs('pip install vllm-pd-spec  # next to vllm; pip install -U vllm_pd_spec') == \
        ['pip install -U vllm_pd_spec', 'pip install vllm-pd-spec']
    assert check_site.failing_installs('pip install ./vllm_pd_spec; pip install dist/vllm_pd_spec-*.whl; pip install .; '
                                       'pip install vllm-pd-spec-0.1.whl; pip install vllm_pd_spec/') == []

@needs_site
def test_index_reaches_audit_explain_use_and_glossary():
    links = {l for _, l in check_site.parse(DOCS/'index.html').links}
    for nb in ('72_audit', '79_explain', '93_use', '91_glossary', '90_pd_meets_spec'):
        assert nbpath2html(nb + '.ipynb').name in links, nb

# ---- the prep step (no site needed) ----

def test_citations_become_links():
    md = prep_docs.cite_links('vLLM PR #55055 and issue #53514 (vllm-ascend in #11670); '
                              '`vllm/v1/request.py`, `vllm/distributed/kv_transfer/` at commit 73ee90a0 and `21cc7862`.\n'
                              '```\n#55055 in code\n```\n## Heading #55055')
    assert '[#55055](https://github.com/vllm-project/vllm/pull/55055)' in md
    assert '[#53514](https://github.com/vllm-project/vllm/issues/53514)' in md
    assert '[#11670](https://github.com/vllm-project/vllm-ascend/pull/11670)' in md
    assert f'[`vllm/v1/request.py`](https://github.com/vllm-project/vllm/blob/{prep_docs.UPSTREAM_TAG}/vllm/v1/request.py)' in md
    assert f'(https://github.com/vllm-project/vllm/tree/{prep_docs.UPSTREAM_TAG}/vllm/distributed/kv_transfer/)' in md
    assert 'commit [`73ee90a0`](https://github.com/vllm-project/vllm/commit/73ee90a0)' in md
    assert '[`21cc7862`](https://github.com/vllm-project/vllm/commit/21cc7862)' in md
    assert '(https://github.com/vllm-project/vllm/commit/73ee90a0)' in prep_docs.cite_links('(commit `73ee90a0…`)')
    assert '#55055 in code' in md and md.endswith('## Heading #55055')  # code and headings untouched
    assert prep_docs.cite_links('[PR #1234](https://x.org/#1234) `abcdefg` `1234567`') == '[PR #1234](https://x.org/#1234) `abcdefg` `1234567`'

def test_a_file_the_newest_release_removed_links_to_the_release_that_had_it():
    "0.34.0 removed the V1 model runner: its citation links to 0.33.0's tree, a file 0.34.0 has to 0.34.0's."
    assert prep_docs.UPSTREAM_TAG == 'v0.34.0'
    md = prep_docs.cite_links('`vllm/v1/worker/gpu_model_runner.py` and `vllm/v1/worker/gpu/model_runner.py`')
    assert '(https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/worker/gpu_model_runner.py)' in md
    assert '(https://github.com/vllm-project/vllm/blob/v0.34.0/vllm/v1/worker/gpu/model_runner.py)' in md
    src = os.environ.get('VLLM_SOURCES')  # released sources unpacked as <dir>/<version>/vllm/...: the saved map is what they give
    if src: assert prep_docs.removed_files(ROOT/'nbs', src) == json.loads(prep_docs.REMOVED_FILES.read_text())

def test_links_to_notebooks_point_to_pages():
    assert prep_docs.own_links('[x](06_guard_contract.ipynb#a) [y](lookahead.html) [z](https://h.org/a.html)') == \
        '[x](guard_contract.md#a) [y](lookahead.md) [z](https://h.org/a.html)'

def test_exports_cells_show_their_source():
    page = prep_docs.Page('x.md')
    md, _ = page.cell({'cell_type': 'code', 'outputs': [],
                       'source': '#| code-fold: show\n#| code-summary: "Exported source"\n#| exports\ndef f(): return 1'})
    assert md.startswith('???+ source "Exported source"') and '    def f(): return 1' in md

def test_outputs_render_as_tables_text_and_images():
    page = prep_docs.Page('x.md')
    assert page.output({'output_type': 'execute_result', 'data': {'text/markdown': '| a |\n|---|\n| 1 |'}}).startswith('| a |')
    assert 'nb-html' in page.output({'output_type': 'display_data', 'data': {'text/html': '<table></table>'}})
    assert page.output({'output_type': 'stream', 'name': 'stdout', 'text': 'x' * 20}).startswith('```{ .text .nb-output }')
    png = '' .join(json.loads((ROOT/'nbs/00a_plotting.ipynb').read_text())['cells'][-1]['outputs'][0]['data']['image/png'])
    img = page.output({'output_type': 'display_data', 'data': {'image/png': png, 'text/plain': 'Two lines.'}})
    assert 'alt="Two lines."' in img and page.images and page.missing_alt == []

def test_a_table_after_printed_text_stays_a_table():
    "A cell that prints and then returns a Markdown table: the table is not glued to the printed block."
    import markdown
    md, _ = prep_docs.Page('x.md').cell({'cell_type': 'code', 'source': 'print(1); t', 'outputs': [
        {'output_type': 'stream', 'name': 'stdout', 'text': '1\n'},
        {'output_type': 'execute_result', 'data': {'text/markdown': '| a |\n|---|\n| 1 |'}}]})
    assert '<table>' in markdown.markdown(md, extensions=['tables', 'attr_list', 'md_in_html', 'pymdownx.superfences'])  # as the site

def test_nav_is_one_map_then_floors():
    "A deployer's path, the six fixes' pages and beyond the six by name (`NAV`); every other notebook by its floor."
    assert prep_docs.section('92_findings.ipynb') == prep_docs.section('79_explain.ipynb') == prep_docs.section('72_audit.ipynb') \
        == prep_docs.section('71_plugin.ipynb') == prep_docs.section('91_glossary.ipynb') == 'If you deploy P/D with a drafter'
    assert prep_docs.section('95a_fix1_lookahead.ipynb') == prep_docs.section('95f_fix6_kernel_guard.ipynb') == 'The six fixes'
    assert prep_docs.section('90_pd_meets_spec.ipynb') == 'The six fixes'
    assert prep_docs.section('96a_beyond_draft_groups.ipynb') == 'Beyond the six'
    assert prep_docs.section('00_config.ipynb') == prep_docs.section('06_guard_contract.ipynb') == 'Config and contracts'
    assert prep_docs.section('01_lookahead.ipynb') == prep_docs.section('09a_draft_groups.ipynb') == 'Config and contracts'  # contract pages
    assert prep_docs.section('20_triton_kernel_guard.ipynb') == 'Kernels'
    assert prep_docs.section('13_model.ipynb') == 'Model' and prep_docs.section('24_kernel_bench.ipynb') == 'Kernels'
    assert prep_docs.section('34_engine_scheduler.ipynb') == prep_docs.section('36_runner.ipynb') == 'Engine'
    assert prep_docs.section('51_lookahead_experiment.ipynb') == prep_docs.section('61_soak.ipynb') == 'Experiments'
    assert prep_docs.section('70_audit_harness.ipynb') == 'Audit harness and probes' and prep_docs.section('80_cli.ipynb') == 'Command line'
    assert prep_docs.section('index.ipynb') is None
    assert prep_docs.nav_title('`vllm-pd-spec explain`', 'explain') == 'vllm-pd-spec explain'

def test_a_deployer_reads_their_path_first():
    "Am I affected (the home table), the findings, explain, the audit, the plugin; then the six fixes, beyond the six, the engine and the kit."
    order = prep_docs.nav_order([nb.name for nb in NOTEBOOKS])
    first = [e if isinstance(e, tuple) else prep_docs.page_stem(e) for e in order[0][1]]
    assert first[:5] == [prep_docs.AFFECTED, 'findings', 'explain', 'audit', 'plugin']
    sections = [s for s, _ in order]
    assert sections[:3] == ['If you deploy P/D with a drafter', 'The six fixes', 'Beyond the six']
    assert sections.index('Engine') < sections.index("Experiments' kit") < sections.index('Config and contracts')
    fixes = [prep_docs.page_stem(e) for e in order[1][1]]
    assert fixes == ['pd_meets_spec', *prep_docs.FIXES]

def test_one_page_is_titled_fix_6():
    "Each fix has one page that carries its name: two pages titled 'Fix 6' in two sections leave a reader to guess."
    titles = {nb.name: prep_docs.title_of(json.loads(nb.read_text()), nb.name) for nb in NOTEBOOKS}
    for i in range(1, 7):
        assert len([t for t in titles.values() if re.match(rf'Fix {i}\b(?!,)', t)]) == 1, (i, [t for t in titles.values() if t.startswith(f'Fix {i}')])

def test_the_home_pages_list_is_the_nav():
    "The home page's list of pages is `pages_list`: the nav's sections and pages in the nav's order."
    src = ''.join(''.join(c['source']) for c in json.loads((ROOT/'nbs'/'index.ipynb').read_text())['cells'])
    assert 'pages_list(' in src
    md = prep_docs.pages_list(ROOT/'nbs')
    lines = md.split('\n')
    assert lines[0].startswith('- **If you deploy P/D with a drafter**: [Am I affected?](#if-you-run-pd-with-a-drafter) · [What this project found')
    assert [l.split('**')[1] for l in lines] == [s for s, _ in prep_docs.nav_order([nb.name for nb in NOTEBOOKS])]

def test_missing_values_read_as_a_dash():
    md = prep_docs.dash_missing('| a | b | c |\n|---|---|---|\n| None | 1 | NaN |\n|2|None|Nonesuch|\nNone in prose')
    assert md.split('\n')[2:] == ['| — | 1 | — |', '|2| — |Nonesuch|', 'None in prose']
    assert prep_docs.dash_missing_html('<td>None</td><td class="x"> NaN </td><td>Nonesuch</td>') == \
        '<td>—</td><td class="x">—</td><td>Nonesuch</td>'
    out = prep_docs.Page('x.md').output({'output_type': 'execute_result', 'data': {'text/markdown': '| a |\n|---|\n| None |'}})
    assert '| — |' in out and 'None' not in out

def test_a_wide_short_table_is_turned():
    "A table of more than `WIDE_COLS` columns and few rows is shown one row per column, its rows named by what tells them apart."
    head = ['setting', 'seed'] + [f'c{i}' for i in range(10)]
    md = '\n'.join(['| ' + ' | '.join(head) + ' |', '|' + '---|' * 12,
                    '| k=3 | 0 | ' + ' | '.join('1' * 10) + ' |', '| k=3 | 1 | ' + ' | '.join('2' * 10) + ' |'])
    out = prep_docs.turn_wide_tables(md).split('\n')
    assert out[0] == '| setting, seed | k=3, seed 0 | k=3, seed 1 |' and out[2] == '| c0 | 1 | 2 |' and len(out) == 12
    narrow = '| a | b |\n|---|---|\n| 1 | 2 |'
    assert prep_docs.turn_wide_tables(narrow) == narrow

def test_snake_case_headers_may_wrap():
    "A table's header row breaks after `_` (outside code), so a table of long column names fits the column."
    md = prep_docs.header_breaks('| legacy_victims | `a_b` |\n|---|---|\n| x_y | 1 |')
    assert md.split('\n') == ['| legacy_<wbr>victims | `a_b` |', '|---|---|', '| x_y | 1 |']
    assert prep_docs.dash_missing_html('<th>a_b</th><td>c_d</td>') == '<th>a_<wbr>b</th><td>c_d</td>'
    # a link in a header keeps its target whole (a break inside it names a page that does not exist)
    assert prep_docs.header_breaks('| [Fix 2](prefill_backoff.html) |\n|---|').split('\n')[0] == '| [Fix 2](prefill_backoff.html) |'

def test_long_outputs_are_pretty_printed_or_wrapped():
    "A one-line setup dict becomes lines that fit the column; a long line that is no literal is marked to wrap."
    setup = 'fix 5 setup: ' + repr({'ks': (1, 2, 3), 'rules': ('main #45237', '0.24.0', '0.33.0 V1', '0.33.0 V2'),
                                    'num_requests': 16, 'seeds': list(range(12)), 'model': None})
    txt, wrap = prep_docs.fit_output(setup)
    assert not wrap and max(map(len, txt.split('\n'))) <= prep_docs.OUTPUT_COLS and txt.startswith('fix 5 setup: {')
    assert "'model': None" in txt and len(txt.split('\n')) > 1
    assert prep_docs.fit_output('short line') == ('short line', False)
    assert prep_docs.fit_output('word ' * 40)[1]
    md = prep_docs.Page('x.md').output({'output_type': 'stream', 'name': 'stdout', 'text': 'word ' * 40})
    assert md.startswith('```{ .text .nb-output .nb-wrap }')

def test_a_prose_line_starting_with_a_pr_number_is_no_heading():
    "`#54926 reports ...` at a line's start would render as a heading: it becomes a link (or an escaped `#`)."
    md = prep_docs.cite_links("#54926 reports x\n#12 is short\n```\n#3 in code\n```\n# Title")
    assert md.split('\n')[0].startswith('[#54926](https://github.com/vllm-project/vllm/pull/54926)')
    assert md.split('\n')[1] == '\\#12 is short' and '#3 in code' in md and md.endswith('# Title')
    assert prep_docs.hash_digit_lines("#54926 a\n```\n#1 b\n```\n# T\n#2 c") == ['#54926 a', '#2 c']

def test_no_notebook_prose_line_starts_with_hash_and_digit():
    "A markdown line starting `#54926 ...` is a heading to Jupyter and to the site: the notebooks have none."
    found = {nb.name: lines for nb in NOTEBOOKS
             for lines in [[l[:50] for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'markdown'
                            for l in prep_docs.hash_digit_lines(''.join(c['source']))]] if lines}
    assert found == {}, found

# ---- the story checks' rules (tools/check_site.py), on pages made up here ----

def _page(in_short='', headlines=(), tables=()):
    return dict(inShortText=in_short, headlines=list(headlines), tables=list(tables))

WHERE = ("Where. Affected in 0.27.1 (NIXL, Mooncake); fixed in 0.27.1 (MoRI-IO), 0.33.0 (every connector) (the saved audits "
         "of 0.27.1, 0.33.0, for P/D with a drafter). What we measured. ")
HOME = [['fix', 'legacy code', 'consequence seen (legacy)', 'invariant held (fixed)', 'metric: legacy → fixed'],
        ['3: truncation ordering', '0.27.1', 'yes', 'yes', 'requests lost, of 60: 2 → 0']]

def test_two_pages_with_different_figures_for_one_run_disagree():
    same = WHERE + 'Requests lost, of 60: **2** legacy (0.27.1) → **0** fixed (0.33.0). What to do. Upgrade.'
    other = same.replace('**2**', '**3**')
    mismatches = lambda pages: check_site.headline_mismatches(check_site.headline_items(pages))
    assert mismatches({'index.html': _page(tables=[HOME]), 'fix3_truncation_ordering.html': _page(same)}) == {}
    bad = mismatches({'index.html': _page(tables=[HOME]), 'fix3_truncation_ordering.html': _page(other)})
    assert list(bad) == ['fix3_truncation_ordering.html + index.html'] and '3 → 0 on fix3_truncation_ordering.html; 2 → 0 on index.html' in bad[
        'fix3_truncation_ordering.html + index.html'][0]
    # the same metric in other words' order is the same metric; the home table's 'Run: ...' is its run label
    reordered = [HOME[0], HOME[1][:4] + ['lost requests, of 60: 2 → 0 (fixed − legacy -2 ± 1). Run: one stream of 60 requests, seed 0']]
    items = check_site.headline_items({'index.html': _page(tables=[reordered]), 'fix3_truncation_ordering.html': _page(other)})
    assert [h['run'] for h in items if h['page'] == 'index.html'] == ['one stream of 60 requests, seed 0']
    assert '3 → 0 on fix3_truncation_ordering.html; 2 → 0 on index.html' in mismatches(
        {'index.html': _page(tables=[reordered]), 'fix3_truncation_ordering.html': _page(other)})['fix3_truncation_ordering.html + index.html'][0]
    # a figure marked with its run (vllm_pd_spec.tables.headline) is told apart from another run's; one without a run
    # label is not, so it is compared with every run's
    marked = lambda run, legacy: dict(fix='3', run=run, metric='requests lost, of 60', legacy=legacy, fixed='0', inShort=True)
    full, quick = 'full run, 60 requests, seed 0', 'quick run, 60 requests, seed 0'
    labelled = [HOME[0], HOME[1][:4] + [HOME[1][4] + f'. Run: {quick}']]
    items = check_site.headline_items({'index.html': _page(tables=[labelled]),
                                       'fix3_truncation_ordering.html': _page(other, [marked(full, '3'), marked(quick, '2')])})
    assert check_site.headline_mismatches(items) == {} and check_site.unlabelled_headlines(items) == {}
    items = check_site.headline_items({'index.html': _page(tables=[HOME]), 'fix3_truncation_ordering.html': _page(other, [marked(full, '3')])})
    assert check_site.unlabelled_headlines(items) == {'index.html': ['fix 3: requests lost, of 60']}
    assert '3 → 0 on fix3_truncation_ordering.html; 2 → 0 on index.html' in check_site.headline_mismatches(items)['fix3_truncation_ordering.html + index.html'][0]
    # the home table's figure is one its fix page's In short shows, whatever words each gives the metric
    elsewhere = WHERE + 'Engine deaths, of 60: **5** legacy (0.27.1) → **0** fixed (0.33.0). What to do. Upgrade.'
    bad = mismatches({'index.html': _page(tables=[HOME]), 'fix3_truncation_ordering.html': _page(elsewhere)})
    assert bad == {'fix3_truncation_ordering.html + index.html': [
        "fix 3, the home table's requests lost, of 60 (no run label; legacy 0.27.1): 2 → 0 on index.html; "
        "fix3_truncation_ordering.html's In short shows 5 → 0 (legacy 0.27.1)"]}
    assert check_site.same_figure('2.7219', '2.722') and not check_site.same_figure('2.7641', '2.763')
    assert check_site.metric_key("X on D (1 + a / b), MTP k=3") == check_site.metric_key('x on D, MTP k=3 (1 + a / b)')

def test_a_label_the_audit_contradicts_is_named():
    answers = {(r, c): {'nbs/03_truncation_ordering.ipynb': (s, None)}
               for r, cs in {'0.27.1': ('affected', 'affected', 'ok'), '0.33.0': ('ok', 'ok', 'ok')}.items()
               for c, s in zip(check_site.CONNECTORS, cs)}
    fix_nbs = {3: 'nbs/03_truncation_ordering.ipynb'}
    item = lambda label: [dict(page='p.html', fix=3, metric='m', legacy_label=label, fixed_label='0.33.0')]
    assert 'fixed with MoRI-IO: name the connector (affected with: NIXL, Mooncake)' in \
        check_site.label_mismatches(item('0.27.1'), answers, fix_nbs)['p.html'][0]
    assert check_site.label_mismatches(item('0.27.1, NIXL'), answers, fix_nbs) == {}
    assert check_site.label_mismatches(item('main between #45237 and #47466'), answers, fix_nbs) == {}

def test_a_page_whose_verdicts_are_not_explains_is_named():
    answers = {(r, c): {'nbs/03_truncation_ordering.ipynb': ('affected' if r == '0.27.1' and c != 'MoRIIOConnector' else 'ok', None),
                        'nbs/09b_state_slots.ipynb': ('unknown' if c == 'MooncakeConnector' else 'ok', None)}
               for r in ('0.27.1', '0.33.0') for c in check_site.CONNECTORS}
    fix_nbs = {3: 'nbs/03_truncation_ordering.ipynb'}
    assert check_site.where_mismatches('t.html', WHERE, 3, answers, fix_nbs) == {}
    assert check_site.where_mismatches('t.html', WHERE.replace('0.27.1 (MoRI-IO), ', ''), 3, answers, fix_nbs) == \
        {'t.html': ['0.27.1 MoRI-IO: the page reads not said, explain says ok']}
    rows = [['vLLM', 'connector', 'Fix 3', 'beyond the six']] + [
        [r, n, '**affected** → 0.29.0' if r == '0.27.1' and n != 'MoRI-IO' else 'fixed', 'none'] for r in ('0.27.1', '0.33.0')
        for n in check_site.CONNECTORS.values()]
    bad = check_site.affected_mismatches(rows, answers, fix_nbs, ['nbs/09b_state_slots.ipynb'])['index.html']
    assert bad == ['0.27.1 Mooncake, beyond the six: the page reads none, explain says unknown for 09b_state_slots',
                   '0.33.0 Mooncake, beyond the six: the page reads none, explain says unknown for 09b_state_slots']
    rows[1][2] = 'fixed'
    assert '0.27.1 NIXL, fix 3: the page reads ok, explain says affected' in check_site.affected_mismatches(rows, answers, fix_nbs, [])['index.html']
    home = [HOME[0], HOME[1][:3] + ['no: drafter KV stays'] + HOME[1][4:]]
    assert check_site.invariant_mismatches(home, 'every fixed run holds its invariant: yes.')['index.html'][0].startswith("'invariant held' reads no")
    assert check_site.invariant_mismatches(HOME, 'every fixed run holds its invariant: yes.') == {}

def test_the_glossary_check_names_undefined_words():
    terms = check_site.glossary_terms(['Block, slot¶', 'MTP', 'Affected, fixed (a release)', 'text-attn, text-hybrid', 'L'])
    assert {'block', 'slot', 'mtp', 'affected', 'fixed', 'text-attn', 'text-hybrid', 'l'} == terms
    text = 'Multi-module MTP on text-attn with Mooncake and DSpark; TPOT on a GPU; VLLM_PD_SPEC_PLUGIN=1; the census.'
    assert check_site.undefined_terms(text, ['L', 'k', 'num_tokens'], terms) == ['Census', 'DSpark', 'Mooncake', 'TPOT', 'k']

def test_machine_paths_build_words_and_notebook_link_texts_are_found():
    assert house_rules.build_words('saved /tmp/tmpab12/x.json; on the machine without network; on the merged tree; '
                                   'vllm/v1/core.py and /dev/full') == ['/tmp/tmpab12/x.json', 'merged tree', 'the machine', 'without network']
    assert check_site.notebook_link_texts(['09a_draft_groups', 'Fix 2', '02_prefill_backoff.ipynb', 'draft groups']) == \
        ['02_prefill_backoff.ipynb', '09a_draft_groups']
    assert house_rules.build_words('saved /tmp/tmpnibiebda/tiny.json and /tmp/tmp_x7-k2q9/w.safetensors') == \
        ['/tmp/tmp*/tiny.json', '/tmp/tmp*/w.safetensors']

def test_table_cells_get_break_points_at_the_parts_of_names():
    sys.path.insert(0, str(ROOT/'tools'))
    import mkdocs_hooks
    out = mkdocs_hooks.cell_breaks('<p>a_b</p><td>legacy_victims <code>vllm/v1/core/sched.py:Scheduler._reserve</code> 0.27.1 2.273/6</td>')
    assert out == ('<p>a_b</p><td>legacy_<wbr>victims <code>vllm/<wbr>v1/<wbr>core/<wbr>sched.<wbr>py:<wbr>Scheduler.<wbr>_reserve</code>'
                   ' 0.27.1 2.273/6</td>')

def test_figures_link_to_themselves_at_full_size():
    png = ''.join(json.loads((ROOT/'nbs/00a_plotting.ipynb').read_text())['cells'][-1]['outputs'][0]['data']['image/png'])
    page = prep_docs.Page('x.md')
    img = page.output({'output_type': 'display_data', 'data': {'image/png': png, 'text/plain': 'Two lines.'}})
    fn = next(iter(page.images))
    assert img.startswith(f'<a class="nb-zoom" href="{fn}"') and f'<img class="nb-figure" src="{fn}"' in img

def test_readme_shows_markdown_outputs_as_markdown(tmp_path):
    nb = {'cells': [{'cell_type': 'code', 'source': '#| echo: false\nx', 'outputs': [
        {'output_type': 'execute_result', 'data': {'text/markdown': '**What to do.** [plugin](71_plugin.ipynb)'}},
        {'output_type': 'stream', 'name': 'stdout', 'text': 'printed'}]}]}
    (tmp_path/'i.ipynb').write_text(json.dumps(nb))
    prep_docs.readme(tmp_path/'i.ipynb', tmp_path/'R.md')
    md = (tmp_path/'R.md').read_text()
    assert '**What to do.** [plugin](docs/plugin.html)\n' in md and '```\nprinted\n```' in md and '```\n**What' not in md

def test_api_headings_link_their_source_and_an_issue():
    "Each `show_doc` heading is followed by its source on GitHub (file and line) and a link that opens an issue about it."
    links = prep_docs.symbol_links()
    got = links[('tables', 'reader_table')]
    line = next(i for i, l in enumerate((ROOT/'vllm_pd_spec/tables.py').read_text().splitlines(), 1) if l.startswith('def reader_table'))
    assert got == (f'[source](https://github.com/vllm-pd-spec/vllm_pd_spec/blob/main/vllm_pd_spec/tables.py#L{line})'
                   ' · [report an issue](https://github.com/vllm-pd-spec/vllm_pd_spec/issues/new?title=vllm_pd_spec.tables.reader_table%3A+)')
    md = prep_docs.add_symbol_links('---\n\n### reader_table\n\n```python\ndef reader_table(...)\n```\n### not_a_symbol', 'tables', links)
    assert md.split('\n')[2:5] == ['### reader_table', '', got] and md.endswith('### not_a_symbol')
    page = prep_docs.api_page({('tables', 'reader_table'), ('config', 'fixes')})
    assert '## `vllm_pd_spec.tables`\n\n[`reader_table`](tables.md#reader_table)\n' in page and '[`Fixes`](config.md#fixes)' in page
    assert '`markdown_table`' not in page  # a name no page documents is left out

def test_pngs_ship_in_256_colours():
    from PIL import Image
    png = ''.join(json.loads((ROOT/'nbs/00a_plotting.ipynb').read_text())['cells'][-1]['outputs'][0]['data']['image/png'])
    page = prep_docs.Page('x.md')
    page.output({'output_type': 'display_data', 'data': {'image/png': png, 'text/plain': 'A plot.'}})
    import base64, io
    raw = next(iter(page.images.values()))
    assert Image.open(io.BytesIO(raw)).mode == 'P' and len(raw) < len(base64.b64decode(png))

@needs_site
def test_no_page_shows_a_memory_address():
    "A default argument rendered as `<function <lambda> at 0x7f...>` changes with every build and tells a reader nothing."
    strip = lambda html: re.sub(r'<[^>]+>', '', html)
    shown = {p.name: m.group(0) for p in DOCS.glob('*.html') if (m := re.search(r'\bat 0x[0-9a-f]{8,}', strip(p.read_text())))}
    assert shown == {}, f'pages showing an object address: {shown}'
