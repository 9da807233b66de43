"""`vllm-pd-spec explain` read as a deployer runs it: a `vllm serve` line, a model's config.json (written here, nothing
downloaded), a vLLM release; the verdicts per page for that release and connector."""
import contextlib, io, json, re, shlex
from pathlib import Path
import pytest
from vllm_pd_spec import explain as E
from vllm_pd_spec.cli import main

CONFIGS = {  # a small config.json per architecture explain reads, with the field names vLLM 0.33.0 reads
    'deepseek_v3': dict(model_type='deepseek_v3', architectures=['DeepseekV3ForCausalLM'], num_hidden_layers=4,
                        num_nextn_predict_layers=3),
    'qwen3_next': dict(model_type='qwen3_next', architectures=['Qwen3NextForCausalLM'], num_hidden_layers=8,
                       full_attention_interval=4, num_nextn_predict_layers=1),
    'qwen3_5': dict(model_type='qwen3_5', architectures=['Qwen3_5ForConditionalGeneration'], text_config=dict(
        num_hidden_layers=4, layer_types=['linear_attention'] * 3 + ['full_attention'], mtp_num_hidden_layers=2)),
    'inkling': dict(model_type='inkling_model', architectures=['InklingForCausalLM'], num_hidden_layers=4, local_layer_ids=[0, 1, 2],
                    sliding_window_size=512, sconv_kernel_size=4, mtp_config=dict(num_nextn_predict_layers=3)),
    'llama': dict(model_type='llama', architectures=['LlamaForCausalLM'], num_hidden_layers=4),
}

def serve(model:str, method:str, k:int, connector:str, role:str='kv_both')->str:
    spec = json.dumps(dict(method=method, num_speculative_tokens=k))
    kv = json.dumps(dict(kv_connector=connector, kv_role=role))
    return f'vllm serve {model} --speculative-config {shlex.quote(spec)} --kv-transfer-config {shlex.quote(kv)}'

def answer(tmp_path, arch:str, method:str, k:int, connector:str, release:str, *extra)->dict:
    "`explain --json` for a model folder holding the architecture's config.json, run through the CLI's `main`."
    m = tmp_path / arch
    m.mkdir(exist_ok=True); (m / 'config.json').write_text(json.dumps(CONFIGS[arch]))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(['explain', '--explain-vllm-args', serve(str(m), method, k, connector), '--vllm-version', release, '--json', *extra]) == 0
    return json.loads(out.getvalue())

def verdicts(r:dict)->dict:
    "page title -> (status, what to do) for the pages that are not plainly ok (nor unread: no saved audit row for them)."
    unread = lambda a: a['status'] == 'unknown' and not any(n['audit_rows'] for n in a['numbers'].values())
    return {a['page']: (a['status'], (a['do'] or {}).get('kind')) for a in r['answers'] if a['status'] not in ('ok', 'n/a') and not unread(a)}

F1, F2, G, C = 'Fix 1: one lookahead for every consumer', 'Fix 2: the prefill backoff', 'Drafter groups and the transfer set', \
               'The connector path equals the plain path'
W = 'A load that holds blocks is never stranded'   # 0.27.1's and 0.29.0's schedulers lack #57104's margin: D can stall
H = 'Lookahead block hashes'   # before 0.34.0, NIXL, Mooncake and the offloading connectors drop a block where 0.34.0 hashes ahead

@pytest.mark.parametrize('connector,release,expected', [
    ('MooncakeConnector', '0.34.0', {F2: ('affected', 'plugin')}),          # 0.34.0 keeps Mooncake's and MoRI-IO's legacy backoff
    ('MoRIIOConnector', '0.34.0', {F2: ('affected', 'plugin')}),
    ('NixlConnector', '0.34.0', {}),                                         # fix 5 fixed: the removed V1 runner is not read as legacy
    ('MooncakeConnector', '0.33.0', {F2: ('affected', 'plugin'), H: ('affected', 'upgrade')}),   # 0.33.0's Mooncake keeps the legacy backoff
    ('MoRIIOConnector', '0.33.0', {F2: ('affected', 'plugin')}),
    ('NixlConnector', '0.33.0', {H: ('affected', 'upgrade')}),              # NIXL has #55055; the drop where 0.34.0 hashes
    ('NixlConnector', '0.27.1', {F1: ('affected', 'upgrade'), F2: ('affected', 'upgrade'), W: ('affected', 'upgrade'), H: ('affected', 'upgrade')}),
    ('MooncakeConnector', '0.27.1', {F1: ('affected', 'upgrade'), F2: ('affected', 'upgrade+plugin'), W: ('affected', 'upgrade'),
                                     H: ('affected', 'upgrade')}),
    ('NixlConnector', '0.29.0', {F2: ('affected', 'upgrade'), W: ('affected', 'upgrade'), H: ('affected', 'upgrade')}),   # 0.29.0 derives fix 1's numbers itself, no backoff yet
    ('MooncakeConnector', '0.29.0', {F2: ('affected', 'upgrade+plugin'), W: ('affected', 'upgrade'), H: ('affected', 'upgrade')})])
def test_deepseek_v3_multi_module_mtp(tmp_path, connector, release, expected):
    r = answer(tmp_path, 'deepseek_v3', 'mtp', 3, connector, release)
    assert verdicts(r) == expected
    assert r['deployment']['mtp_modules'] == 3 and r['vllm']['model_config']['architecture'] == 'DeepseekV3ForCausalLM'
    t = r['draft_taint']   # 0.33.0's backoff moves the taint: more entries than the legacy backoff, a hand-off clears it
    assert t['fixed_backoff']['entries'] == 10 and t['handoff']['entries'] == t['d_recompute']['entries'] == 0
    # the legacy backoff: 4 entries from P's guesses and 4 from D's first step re-prefilling k - 1 = 2 positions of another request's slot rows
    assert t['as_deployed']['entries'] == (8 if F2 in expected else 10)
    do = {a['page']: a['do'] for a in r['answers'] if a['do']}
    if F1 in do: assert do[F1]['release'] == '0.29.0'                        # the first release whose consumers agree
    if F2 in do: assert do[F2].get('release', release) == ('0.33.0' if do[F2]['kind'] != 'plugin' else release)  # the first with #55055

def test_plugin_flag_brings_mooncake_up(tmp_path):
    r = answer(tmp_path, 'deepseek_v3', 'mtp', 3, 'MooncakeConnector', '0.33.0', '--plugin')
    assert verdicts(r) == {H: ('affected', 'upgrade')} and r['vllm']['plugin'] and r['draft_taint']['as_deployed']['backoff'] == 2   # the plugin brings no hashes
    assert main(['explain', '--vllm-version', '0.27.1', '--plugin']) == 2   # no saved audit of 0.27.1 with the plugin

def test_qwen3_next_hybrid(tmp_path):
    "One MTP layer in the checkpoint: a single module reads one token ahead, so the backoff forms agree (1 for GDN)."
    r = answer(tmp_path, 'qwen3_next', 'mtp', 2, 'NixlConnector', '0.27.1')
    assert r['deployment']['mamba'] and r['deployment']['mtp_modules'] == 1 and r['fixed']['prefill_backoff'] == r['legacy']['prefill_backoff'] == 1
    assert verdicts(r) == {G: ('affected', 'upgrade'), C: ('affected', 'upgrade'), W: ('affected', 'upgrade'), H: ('affected', 'upgrade')}
    assert '6 linear attention (GDN), 2 full attention' in r['vllm']['model_config']['layers']
    assert verdicts(answer(tmp_path, 'qwen3_next', 'mtp', 2, 'NixlConnector', '0.33.0')) == {H: ('affected', 'upgrade')}

def test_qwen3_5_hybrid_moriio(tmp_path):
    "Two MTP layers, k=2: L=2, and with GDN layers the fixed backoff max(1, L-1) equals the Mamba-only legacy one."
    r = answer(tmp_path, 'qwen3_5', 'mtp', 2, 'MoRIIOConnector', '0.33.0')
    assert r['deployment']['mtp_modules'] == 2 and verdicts(r) == {}
    r = answer(tmp_path, 'qwen3_5', 'mtp', 2, 'MoRIIOConnector', '0.27.1')   # no saved row for MoRI-IO's state slots in 0.27.1
    assert verdicts(r) == {F1: ('affected', 'upgrade'), G: ('affected', 'upgrade'), C: ('affected', 'upgrade'),
                           W: ('affected', 'upgrade'), 'Mamba state slots in the exchange': ('unknown', None)}

def test_qwen3_5_three_mtp_layers_on_0271(tmp_path):
    "k=3 over three MTP layers with GDN: 0.27.1's NIXL backs off one token; fix 5 is judged at that backoff, where both rules agree."
    CONFIGS['qwen3_5_mtp3'] = dict(CONFIGS['qwen3_5'], text_config=dict(CONFIGS['qwen3_5']['text_config'], mtp_num_hidden_layers=3))
    r = answer(tmp_path, 'qwen3_5_mtp3', 'mtp', 3, 'NixlConnector', '0.27.1')
    assert verdicts(r) == {F1: ('affected', 'upgrade'), F2: ('affected', 'upgrade'), G: ('affected', 'upgrade'), C: ('affected', 'upgrade'),
                           W: ('affected', 'upgrade'), H: ('affected', 'upgrade')}
    assert r['fixed']['is_spec_decode_row.d_first_step'] != r['legacy']['is_spec_decode_row.d_first_step']   # the table's difference: two backoffs
    assert verdicts(answer(tmp_path, 'qwen3_5_mtp3', 'mtp', 3, 'NixlConnector', '0.33.0')) == {H: ('affected', 'upgrade')}

def test_inkling_sliding_windows(tmp_path):
    r = answer(tmp_path, 'inkling', 'mtp', 3, 'MooncakeConnector', '0.33.0')
    assert r['deployment']['sliding_window'] == 4 and not r['deployment']['mamba'] and verdicts(r) == {F2: ('affected', 'plugin'), H: ('affected', 'upgrade')}
    assert r['fixed']['extra_retained_tokens'] == 2 and 'short-convolution state (window 4)' in r['vllm']['model_config']['layers']

@pytest.mark.parametrize('method,connector,release,expected', [
    ('eagle3', 'OffloadingConnector', '0.27.1', {H: ('affected', 'upgrade')}), ('dflash', 'NixlConnector', '0.27.1', {G: ('affected', 'upgrade'), C: ('affected', 'upgrade'), W: ('affected', 'upgrade')}),
    ('dflash', 'NixlConnector', '0.33.0', {})])
def test_llama_with_a_drafter(tmp_path, method, connector, release, expected):
    r = answer(tmp_path, 'llama', method, 3, connector, release)
    assert verdicts(r) == expected and r['draft_taint'] is None
    # 0.27.1 sizes DFlash's lookahead k + 1 (its own variant, which the saved audit names): fix 4 is not affected
    assert (r['answers'][[a['page'] for a in r['answers']].index("Fix 4: DFlash's lookahead slots")]['status'] == 'ok')

def test_fix2_verdict_follows_the_saved_audit():
    "Cross-check: for a deployment whose fixed and legacy backoffs differ, fix 2 is affected exactly where the audit's connector row is legacy."
    d = dict(method='mtp', k=3, mtp_modules=3, role='pd')
    for release in E.supported_releases():
        rows = {r['connector']: r['verdict'] for r in E.load_audit(release) if r.get('connector')}
        for conn, scheds in E.PD_CONNECTORS.items():
            r = E.explain_deployment(dict(kv_transfer_config=dict(kv_connector=conn, kv_role='kv_both')), None, release, **d)
            status = {a['page']: a['status'] for a in r['answers']}[F2]
            verdict = min((rows[s] for s in scheds), key=['legacy', 'differs', 'fixed'].index)
            assert status == dict(legacy='affected', differs='unknown', fixed='ok')[verdict], (release, conn)   # differs: neither form

def test_done_when_example_fits_a_screen(tmp_path, capsys):
    m = tmp_path / 'm'; m.mkdir(); (m / 'config.json').write_text(json.dumps(CONFIGS['inkling']))
    assert main(['explain', '--explain-vllm-args', serve('./m', 'mtp', 3, 'MooncakeConnector'), '--model-config', str(m / 'config.json'),
                 '--vllm-version', '0.33.0']) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(map(len, lines)) <= E.WIDTH and len(lines) <= 40 and '.ipynb' not in out and not re.search(r'fix (7|8|9|10)\b', out, re.I)
    assert 'AFFECTED    Fix 2: the prefill backoff' in out and 'VLLM_PD_SPEC_PLUGIN=1' in out and 'hand-off' in out

def test_pages_are_the_site_titles():
    "Every page explain names is a notebook's own heading (the site's title), and every hazard's page is listed."
    nbs = Path(__file__).parent.parent / 'nbs'
    for nb, title in E.PAGES.items():
        if not (nbs.parent / nb).exists(): continue   # a page of a branch not merged here yet; HAZARDS below must name it
        cells = json.loads((nbs.parent / nb).read_text())['cells']
        heading = ''.join(next(c for c in cells if c['cell_type'] == 'markdown')['source']).splitlines()[0]
        assert heading == f'# {title}', nb
    assert {nb for _, nb, _ in E.HAZARDS.values()} <= set(E.PAGES)

def test_model_config_errors(tmp_path, capsys):
    f = tmp_path / 'config.json'
    for cfg, names in [(dict(model_type='gemma3', architectures=['Gemma3ForCausalLM']), "model_type='gemma3'"),
                       (dict(model_type='qwen3_next', num_hidden_layers=2, layer_types=['mamba', 'x']), 'layer_types='),
                       (dict(model_type='inkling_model', num_hidden_layers=2, local_layer_ids=[5]), 'local_layer_ids=')]:
        f.write_text(json.dumps(cfg))
        assert main(['explain', '--model-config', str(f), '--vllm-version', '0.33.0']) == 2
        err = capsys.readouterr().err
        assert err.count('\n') == 1 and '--model-config' in err and names in err
    f.write_text(json.dumps(CONFIGS['llama']))   # MTP asked of a checkpoint without MTP layers
    assert main(['explain', '--model-config', str(f), '--vllm-version', '0.33.0', '--method', 'mtp', '-k', '2']) == 2
    assert 'no MTP layers' in capsys.readouterr().err

def test_vllm_args_from_a_file_and_the_served_folder(tmp_path):
    m = tmp_path / 'm'; m.mkdir(); (m / 'config.json').write_text(json.dumps(CONFIGS['qwen3_next']))
    args = tmp_path / 'serve.sh'
    args.write_text(serve(str(m), 'mtp', 2, 'NixlConnector') + ' \\\n  --block-size 32 --max-model-len 64')
    out = io.StringIO()
    with contextlib.redirect_stdout(out): assert main(['explain', '--explain-vllm-args', str(args), '--vllm-version', '0.33.0', '--json']) == 0
    r = json.loads(out.getvalue())
    assert r['deployment']['block_size'] == 32 and r['deployment']['prompt_len'] == 64 and r['deployment']['mamba']  # config read from the model folder

def test_old_flags_still_give_the_table(capsys):
    if E.installed_vllm() in E.supported_releases(): pytest.skip('a supported vLLM is installed: explain answers for it')
    assert main(['explain', '--method', 'mtp', '-k', '3', '--mtp-modules', '3', '--mamba']) == 0
    assert 'prefill_backoff' in capsys.readouterr().out
    assert main(['explain', '--explain-vllm-args', 'vllm serve ./m']) == 2   # a per-release answer needs a release
    assert '--vllm-version: not given and no vLLM installed' in capsys.readouterr().err

def test_unsupported_release(capsys):
    "An unaudited release says so, names the saved ones and how to audit it (`vllm-pd-spec audit`, then `--audit`)."
    assert main(['explain', '--vllm-version', '0.30.0']) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and all(v in err for v in E.supported_releases()) and 'has no saved audit' in err
    assert 'vllm-pd-spec audit --json audit.json' in err and 'explain --audit audit.json' in err

def test_removed_code_is_never_read_as_legacy():
    "0.34.0 removed the V1 model runner: its `not present` row is dropped, the V2 row decides fix 5; 0.27.1's absent rows (not yet written) stay legacy."
    gone = E.removed_rows(E.load_audit('0.34.0'), '0.34.0')
    assert '5. rows: V1 GPUModelRunner num_decode_draft_tokens' in gone
    f = E.release_forms('0.34.0', ['NixlConnector'])['is_spec_decode_row']
    assert f == dict(form='fixed', rows=['5. rows: V2 MambaHybridModelState.prepare_attn'])
    assert E.removed_rows(E.load_audit('0.27.1'), '0.27.1') == set()
    assert E.release_forms('0.27.1', ['NixlConnector'])['num_prefill_lookahead_tokens']['form'] == 'legacy'  # not present: pre-#55055
    assert E.release_forms('0.34.0', ['NixlConnector'])['writes_last_sampled']['form'] == 'fixed'  # the CPU port's row does not decide

def test_your_own_audit(tmp_path, capsys):
    "`--audit FILE`: a release with no saved audit, answered from the user's audit (here: 0.34.0's, with Mooncake's backoff fixed)."
    rows = E.load_audit('0.34.0')
    for r in rows:
        if r['contract'] == 'connector: MooncakeConnectorScheduler': r['verdict'] = 'fixed'
    f = tmp_path / 'audit.json'; f.write_text(json.dumps(rows))
    line = serve('./m', 'mtp', 3, 'MooncakeConnector')
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(['explain', '--explain-vllm-args', line, '--audit', str(f), '--vllm-version', '0.35.0', '--mtp-modules', '3', '--json']) == 0
    r = json.loads(out.getvalue())
    assert r['vllm']['release'] == '0.35.0' and r['vllm']['release_from'] == '--audit'
    assert {a['page']: a['status'] for a in r['answers']}[F2] == 'ok'
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(['explain', '--explain-vllm-args', line, '--vllm-version', '0.34.0', '--mtp-modules', '3']) == 0
    (tmp_path / 'bad.json').write_text('{"not": "an audit"}')
    assert main(['explain', '--explain-vllm-args', line, '--audit', str(tmp_path / 'bad.json')]) == 2
    assert capsys.readouterr().err.count('\n') == 1

def test_fix3_prefix_hit_on_p(tmp_path):
    "A P instance whose prefix hit covers the truncated prompt: 0.27.1's NIXL truncates after the lookup (the engine dies), 0.29.0 before."
    r = answer(tmp_path, 'qwen3_next', 'eagle', 2, 'NixlConnector', '0.27.1', '--prompt-len', '33', '--prefix-hit', '33')
    f3 = {a['page']: a for a in r['answers']}['Fix 3: truncate before the prefix lookup']
    assert f3['status'] == 'affected' and f3['do']['release'] == '0.29.0' and 'assert num_new_tokens > 0' in f3['sees'][0]
    r = answer(tmp_path, 'qwen3_next', 'eagle', 2, 'NixlConnector', '0.29.0', '--prompt-len', '33', '--prefix-hit', '33')
    assert {a['page']: a['status'] for a in r['answers']}['Fix 3: truncate before the prefix lookup'] == 'ok'
