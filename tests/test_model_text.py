"""The text models: corpus split, tokenizer, shipped weights and cards, the engine serving them (lossless in float64),
training's smallest configuration on CPU, and on CUDA the fla prefill path against ours."""
import json, math, pytest, torch
from dataclasses import replace
from vllm_pd_spec.model.corpus import (corpus_files, load_tokenizer, train_tokenizer, token_stream, heldout_prompts,
                                       encode, decode, EOS_ID, MASK_ID, CORPUS, TOKENIZER)
from vllm_pd_spec.model.drafters import load_model, model_prompts, MODELS, DATA, SpecModel, VARIANTS

TEXT = [n for n in MODELS if n.startswith('text-') and n not in VARIANTS]  # the text targets; a variant ships one drafter

def test_split_by_file():
    tr, ho, al = corpus_files('train'), corpus_files('heldout'), corpus_files('all')
    assert len(tr) + len(ho) == len(al) and not {p for p, _ in tr} & {p for p, _ in ho}
    assert [p for p, _ in ho] == [p for i, (p, _) in enumerate(al) if i % 10 == 9]
    with pytest.raises(ValueError, match='split'): corpus_files('test')
    assert (DATA / 'cpython_LICENSE.txt').exists() and CORPUS.stat().st_size < 2_000_000

def test_tokenizer_round_trip_and_reproducible():
    tok = load_tokenizer()
    assert tok.token_to_id('<|endoftext|>') == EOS_ID and tok.token_to_id('<|mask|>') == MASK_ID
    text = corpus_files('heldout')[1][1][:2000]
    assert decode(encode(text)) == text and decode(encode(text, 'bytes'), 'bytes') == text
    again = train_tokenizer([t for _, t in corpus_files('train')])
    assert json.loads(again.to_str()) == json.loads(TOKENIZER.read_text())

def test_prompts_are_heldout():
    ps = heldout_prompts(4, 256)
    assert all(len(p) == 256 for p in ps) and ps == heldout_prompts(4, 256)
    s = token_stream('heldout')
    step = (s.numel() - 512) // 4
    assert ps[2] == s[2 * step:2 * step + 256].tolist()

def test_weights_within_budget():
    total = sum(p.stat().st_size for p in DATA.glob('*.safetensors'))
    assert total <= 8 * 1024 * 1024, total

@pytest.mark.parametrize('name', TEXT)
def test_shipped_model_and_card(name):
    m = load_model(name)
    card = json.loads((DATA / f'{MODELS[name]}.json').read_text())
    assert m.name == name and card['name'] == name and m.args.mask_token_id == MASK_ID and m.args.n_mtp >= 4
    assert card['training']['params']['total'] == sum(p.numel() for p in m.parameters())
    kinds = set(m.args.layer_kinds)
    assert kinds == ({'gdn', 'full_attention'} if name == 'text-hybrid' else {'full_attention'})
    with pytest.raises(ValueError, match='name'): load_model('text-moe')

def test_same_size_targets():
    a, b = (load_model(n) for n in TEXT)
    pa, pb = (sum(p.numel() for p in m.parameters()) for m in (a, b))
    assert abs(pa - pb) / pa < 0.05

@pytest.mark.parametrize('method', ['mtp', 'eagle', 'dflash'])
def test_engine_serves_text_model_losslessly(method):
    from vllm_pd_spec.engine.llm_engine import LLMEngine, make_config
    m = load_model('text-hybrid', torch.float64)
    prompts = [p[:24] for p in model_prompts('text-hybrid', 2, 64)]
    plain = LLMEngine(make_config(None, model=m), m, dtype=torch.float64).generate(prompts, 10)
    eng = LLMEngine(make_config(method, 4, model=m), m, dtype=torch.float64)
    assert eng.generate(prompts, 10) == plain
    assert eng.spec_stats.num_drafts > 0

def test_training_smallest_config_cpu():
    from vllm_pd_spec.model.train_text import train_text, TINY
    m, rec = train_text('attn', cfg=replace(TINY, target_steps=10, drafter_steps=1, eval_every=9, eval_batches=1), log=None)
    t = [r for r in rec['log'] if r['stage'] == 'target']
    assert t[-1]['target'] < t[0]['target'] < math.log(m.args.vocab_size) + 1

@pytest.mark.gpu
def test_engine_fla_prefill_matches_reference():
    "With fla installed, the engine's CUDA prefill (fla) gives the hidden states of our Triton path within float32 tolerance."
    from vllm_pd_spec.model.gdn import set_gdn_backend, fla_chunk_gated_delta_rule, GDN_TOL
    from vllm_pd_spec.model.model import make_meta
    from vllm_pd_spec.engine.llm_engine import LLMEngine, make_config
    if fla_chunk_gated_delta_rule is None: pytest.skip('needs fla-core (the fla extra)')
    m = load_model('text-hybrid', device='cuda')
    ids = torch.tensor(model_prompts('text-hybrid', 1, 300)[0], device='cuda')
    hs, outs = {}, {}
    for b in ('fla', 'triton'):
        old = set_gdn_backend(b)
        try:
            cache = m.make_cache(num_blocks=32, block_size=16)
            pos, meta = make_meta([dict(block_table=list(range(32)), num_computed=0, query_len=300)], 16, device='cuda')
            hs[b] = m.target(ids, pos, meta, cache)
            outs[b] = LLMEngine(make_config('mtp', 4, model=m), m, device='cuda').generate(model_prompts('text-hybrid', 4, 256), 32)
        finally: set_gdn_backend(old)
    err = ((hs['fla'] - hs['triton']).abs().max() / hs['triton'].abs().max()).item()
    same = sum(a == b for a, b in zip(outs['fla'], outs['triton']))
    print(f'engine prefill, fla vs ours: relative hidden-state error {err:.2e}; {same}/4 greedy outputs identical')
    assert err < GDN_TOL['fla', torch.float32]

def test_model_cards():
    from vllm_pd_spec.model.drafters import model_cards
    cards = {c['name']: c for c in model_cards()}
    assert set(cards) == {n for n, s in MODELS.items() if (DATA / f'{s}.safetensors').exists()} >= set(TEXT)
    for name in TEXT:
        c = cards[name]
        assert {'name', 'params', 'corpus', 'per_position_acceptance', 'zeroed_kv_cost'} <= set(c)
        assert c['params'] == sum(p.numel() for p in load_model(name).parameters())

@pytest.mark.parametrize('name', TEXT)
def test_card_gates_consistent(name):
    "The card's gate verdicts are what `check_gates` says of the card's own figures."
    from vllm_pd_spec.experiments.model_gates import check_gates, METHODS
    card = json.loads((DATA / f'{MODELS[name]}.json').read_text())
    if 'gates' not in card: pytest.skip('gates not measured yet (the gates notebook)')
    rep = card['gates']['measured']
    assert card['gates']['passed'] == check_gates(rep)
    for m in METHODS:
        pp = rep[m]['per_position']
        assert len(pp) == rep['k'] and all(1 >= a >= b >= 0 for a, b in zip(pp, pp[1:]))  # cumulative: non-increasing
        assert rep[m]['mean_acceptance_length'] == pytest.approx(1 + sum(pp))

def test_fla_not_used_without_cuda():
    from vllm_pd_spec.model.gdn import fla_backward_ok, fla_chunk_gated_delta_rule
    if torch.cuda.is_available(): pytest.skip('a CUDA machine')
    assert fla_chunk_gated_delta_rule is None and fla_backward_ok() is False  # fla is imported on CUDA machines only

def test_heldout_examples_continue_the_prompts():
    "The text task's requests are the gates' held-out prompts, each with the tokens that follow it in the held-out stream."
    from vllm_pd_spec.model.data import heldout_examples, prefix_match
    ex = heldout_examples(5, 64, 16)
    assert [e.prompt for e in ex] == heldout_prompts(5, 64)
    s = token_stream('heldout').tolist()
    for e in ex:
        i = next(i for i in range(len(s)) if s[i:i + 64] == e.prompt)
        assert s[i + 64:i + 80] == e.answer and prefix_match(e.answer, e.answer + [0]) == 16
    with pytest.raises(ValueError, match='answer_len'): heldout_examples(2, 64, 300)

def test_saved_runs_read_back(tmp_path):
    "Every saved run is read, in number order; shipped weights are matched to the log they came from; a new run needs no edits."
    from pathlib import Path
    from vllm_pd_spec.model.train_text import saved_runs, shipped_from, latest, read_run_log
    runs = saved_runs()  # the checkout's nbs/runs
    assert list(runs) == list(saved_runs(Path(__file__).parents[1] / 'nbs' / 'runs'))
    assert list(runs)[:2] == ['text_h200_run1', 'text_h200_run2']
    for name in ('text-attn', 'text-hybrid'):  # the shipped cards name a saved log with the same final figures
        run, stem = shipped_from(name, runs)
        assert run and runs[run]['logs'][stem]['model'] == name
    stopped = runs['text_h200_run1']['logs']['text-hybrid-bytes']
    assert stopped['result'] is None and 'Hopper' in stopped['stopped_on']
    t = json.loads((DATA / 'text_attn.json').read_text())['training']
    for r in ('text_h200_run10', 'text_h200_run3'):
        (tmp_path / r).mkdir()
    (tmp_path / 'text_h200_run3' / 'text-attn-bytes.retry.log').write_text(
        'probe (ms/step): {\'fla/target\': 1.5, \'fla/drafters\': 2.5} steps scaled by 1.0\nstage=target step=9 t=1\n'
        f"wrote x.safetensors {json.dumps({k: t[k] for k in ('time_s', 'heldout_loss', 'heldout_accuracy', 'params')})}\n")
    (tmp_path / 'text_h200_run10' / 'gates.log').write_text('text-hybrid (bytes) MTP position 1 PASS\n')
    new = saved_runs(tmp_path)
    assert list(new) == ['text_h200_run3', 'text_h200_run10'] and latest(new, 'gates_log')[0] == 'text_h200_run10'
    log = new['text_h200_run3']['logs']['text-attn-bytes.retry']
    assert (log['model'], log['tokenizer'], log['attempt'], log['steps'], log['probe']) == ('text-attn', 'bytes', 'retry', {'target': 10}, {'fla/target': 1.5, 'fla/drafters': 2.5})
    assert shipped_from('text-attn', new) == ('text_h200_run3', 'text-attn-bytes.retry') and latest(new, 'backend_ms') == (None, None)

def test_variant_ships_its_drafter_alone():
    "The conv MTP variant (ours): its file holds the MTP depths alone; target, EAGLE and DFlash are its base's shipped ones."
    from safetensors import safe_open
    from vllm_pd_spec.engine.runner import drafter_layer_names
    name = 'text-attn-convmtp'
    v, base = load_model(name), load_model(VARIANTS[name]['base'])
    with safe_open(str(DATA / f'{MODELS[name]}.safetensors'), 'pt') as f: keys = set(f.keys())
    assert keys and all(k.startswith('mtp.') for k in keys) and keys == {k for k in v.state_dict() if k.startswith('mtp.')}
    sd, sb = v.state_dict(), base.state_dict()
    assert all(torch.equal(sd[k], sb[k]) for k in sb if not k.startswith('mtp.'))
    assert type(v.mtp).__name__ == 'ConvMTPDrafter' and v.mtp.kernel == VARIANTS[name]['kernel'] == 4
    assert {'mtp.0.sconv.kv', 'mtp.3.sconv.out'} <= set(drafter_layer_names(v, 'mtp'))  # the convolution state joins the drafter's KV
    card = json.loads((DATA / f'{MODELS[name]}.json').read_text())
    assert card['base'] == 'text-attn' and card['tokenizer'] == 'bpe1024' and card['training']['params']['mtp'] == sum(p.numel() for p in v.mtp.parameters())

def test_variant_card_gates_and_costs():
    from vllm_pd_spec.experiments.model_gates import check_gates
    from vllm_pd_spec.model.drafters import model_cards
    card = json.loads((DATA / 'text_attn_convmtp.json').read_text())
    rep = card['gates']['measured']
    assert card['gates']['passed'] == check_gates(rep) and set(check_gates(rep)) == set(check_gates(json.loads((DATA / 'text_attn.json').read_text())['gates']['measured']))
    m = rep['mtp']
    assert set(rep) >= {'mtp', 'next_token_accuracy'} and not {'eagle', 'dflash'} & set(rep)
    assert m['mean_acceptance_length'] == pytest.approx(1 + sum(m['per_position'])) and set(m['last_positions_cost']) == {'2', '3', '4'}
    assert all(m['last_positions'][k]['zeroed_positions'] == int(k) - 1 for k in m['last_positions'])
    row = next(c for c in model_cards() if c['name'] == 'text-attn-convmtp')
    assert row['base'] == 'text-attn' and row['last_positions_cost'] == m['last_positions_cost'] and row['zeroed_kv_cost'] == {'mtp': m['zeroed_kv_cost']}

def test_engine_serves_variant_as_the_clean_loop():
    "The runner's MTP path serves the conv MTP unchanged: outputs and per-position acceptance equal the clean reference loop's."
    from vllm_pd_spec.engine.llm_engine import LLMEngine, make_config
    from vllm_pd_spec.model.drafters import spec_decode
    m = load_model('text-attn-convmtp', torch.float64)
    prompt = model_prompts('text-attn', 1, 64)[0][:32]
    eng = LLMEngine(make_config('mtp', 3, model=m), m, dtype=torch.float64)
    out = eng.generate([prompt], 10)[0]
    ref, st = spec_decode(m, prompt, 10, 'mtp', k=3)
    assert out == ref == spec_decode(m, prompt, 10)[0]
    assert (eng.spec_stats.num_drafts, list(eng.spec_stats.num_accepted_tokens_per_pos)) == (st.num_drafts, st.accepted_per_pos)

@pytest.mark.parametrize('arm,b', [('legacy', 0), ('backoff', 2), ('handoff', 0)])
def test_fix2_census_covers_the_conv_state(arm, b):
    "Fix 2's arms on the conv MTP (ours): the census (attention KV and convolution state per depth) equals the contract with `conv=True`."
    from vllm_pd_spec.experiments import backoff as X
    from vllm_pd_spec.contracts import backoff as B
    from vllm_pd_spec.config import SamplingParams
    k, n, m = 3, 24, load_model('text-attn-convmtp', torch.float64)
    ps = [p[:n] for p in model_prompts('text-attn', 2, 64)]
    with torch.no_grad(): run = X.serve_arm(arm, m, k, ps, max_tokens=k + 3, backoff=lambda has_mamba, L: b, max_num_seqs=1)
    assert run['kv']['req-0'].shape[-1] == 2 * 3 * m.args.d_model  # per position: keys and values, then four convolution streams
    for i, p in enumerate(ps):
        tokens = p + run['outputs'][i]
        got = X.census(run['kv'][f'req-{i}'], X.reference_drafter_kv(m, tokens, n, k))
        e = X.num_matched(run['continuation'][f'req-{i}'], tokens, B.remote_prefill_token_count(n, run['backoff']), k)
        want = X.predicted(n, k, run['backoff'], run['handoff_window'], e, reset_on_add=run['reset_on_add'],
                           num_rejected=run['log'].first_rejected(f'req-{i}'), conv=True)
        assert torch.equal(got, want), (got.nonzero().tolist(), want.nonzero().tolist())
        if arm == 'legacy':  # the stale re-prefill's taint reaches module 0's last prompt position through the convolution
            assert got[0, n - 1] and not X.predicted(n, k, run['backoff'], run['handoff_window'], e, num_rejected=run['log'].first_rejected(f'req-{i}'))[0, n - 1]

def test_registered_gap_variant_round_trips(tmp_path):
    "The registered variant that leans on its convolution state: its file's metadata rebuilds depths whose attention skips 3 positions, on text-attn's target."
    from vllm_pd_spec.model.train_text import save_variant
    name = 'text-attn-convmtp-gap'
    assert VARIANTS[name] == dict(base='text-attn', mtp='conv', kernel=4, attention='gap', gap=3)
    base = load_model('text-attn')
    torch.manual_seed(0)
    m = SpecModel(base.args, mtp_kernel=4, mtp_gap=3)
    m.load_state_dict({k: v for k, v in base.state_dict().items() if not k.startswith('mtp.')}, strict=False)
    back = load_model(name, path=save_variant(m, name, dict(tokenizer='bpe1024'), tmp_path))
    assert back.mtp.gap == 3 and all(d.gap == 3 for d in back.mtp.modules_) and back.name == name
    assert torch.equal(back.mtp.modules_[2].conv, m.mtp.modules_[2].conv.to(torch.bfloat16).float())
    assert torch.equal(back.target.embed.weight, base.target.embed.weight)
    if not (DATA / f'{MODELS[name]}.safetensors').exists():  # registered, not shipped: the name is refused without a file
        with pytest.raises(ValueError, match='ship'): load_model(name)
