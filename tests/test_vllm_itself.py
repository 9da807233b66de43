"""vLLM itself on a GPU: the saved run's reading (`vllm_pd_spec.vllm_itself`), and the tools that made it
(`tools/vllm_gpu/`): the named ablations, the checkpoint's tokenizer, the experiments' comparison."""
import copy, importlib, json, os, sys, zipfile
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tools' / 'vllm_gpu'))
import ablations, experiments  # noqa: E402
from vllm_pd_spec import vllm_itself as V  # noqa: E402

RUN = ROOT / 'nbs' / 'runs' / 'vllm_itself_h200'

@pytest.fixture(scope='module')
def run(): return V.load_vllm_run(RUN, ROOT / 'nbs' / 'runs' / 'vllm_itself_ours.json')

def test_saved_run_fix3(run):
    f = V.fix3_figures(run['run'])
    assert f['shipped_died']['source'] == 'assert num_new_tokens > 0' and f['fixed_died'] is None
    assert (f['shipped_served'], f['fixed_served']) == (3, 4)
    assert V.seen_in_vllm(3, run)['seen'] == 'yes'

def test_the_home_tables_seen_column(run, monkeypatch):
    "The home table's 'seen in vLLM' column: fixes 3, 5 and 6 reproduced in vLLM 0.25.0 on an H200, 1, 2 and 4 not runnable there."
    from vllm_pd_spec.reproduce import summary_table
    from vllm_pd_spec.experiments.common import ExperimentResult
    col = V.seen_column(run)
    assert col[3].startswith('yes: reproduced in vLLM 0.25.0 on an H200') and 'assert num_new_tokens > 0' in col[3]
    assert all(col[f].startswith('not runnable on 0.25.0') for f in (1, 2, 4))
    assert all(col[f].startswith('yes: P/D equal to standalone') and col[f].endswith('vLLM 0.25.0 on an H200)') for f in (5, 6))
    r = ExperimentResult(fix=3, name='truncation ordering', metric='m', legacy=1, fixed=0, invariant='i', invariant_holds=True, legacy_consequence_seen=True)
    t = summary_table([r], col)
    assert '| seen in vLLM |' in t.splitlines()[0] and col[3].split(':')[0] in t.splitlines()[-1]
    assert 'seen in vLLM' not in summary_table([r])

def test_seen_in_vllm_reads_the_pd_arms(run):
    assert V.seen_in_vllm(5, run)['seen'] == V.seen_in_vllm(6, run)['seen'] == 'yes'
    assert 'paired over 16 requests' in V.seen_in_vllm(6, run)['reason']
    swapped = copy.deepcopy(run)  # the legacy form swapped back for the fixed one: the same outputs, nothing decided
    arms = swapped['run']['results']['pd_v2']['arms']
    arms['guard_off'] = copy.deepcopy(arms['shipped'])
    assert V.seen_in_vllm(6, swapped)['seen'] == 'not decided'
    arms['guard_off']['first_divergence'] = [0] * 16  # the ablation better than shipped: 'no'
    arms['shipped'], arms['guard_off'] = arms['guard_off'], arms['shipped']
    assert V.seen_in_vllm(6, swapped)['seen'] == 'no'
    arms['guard_off'] = dict(error=dict(type='RuntimeError'))
    assert V.seen_in_vllm(6, swapped)['seen'] == 'not run'  # an arm that failed is no figure
    for n in ('pd_v1', 'pd_v2'): swapped['run']['results'][n]['arms'].pop('shipped')
    assert V.seen_in_vllm(5, swapped)['seen'] == 'not run'

def test_seen_in_vllm_without_a_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert V.seen_in_vllm(3)['reason'] == 'not run: no saved run in vLLM itself'
    assert set(V.seen_column()) == set(range(1, 7))
    with pytest.raises(ValueError, match='fix=0 is invalid'): V.seen_in_vllm(0)
    with pytest.raises(FileNotFoundError, match='holds no vllm_itself.json'): V.load_vllm_run(tmp_path)

def test_ablated_source_refuses_an_expression_not_found_once():
    assert ablations.ablated_source('x = a + b', 'a + b', 'a - b', 't') == 'x = a - b'
    for src in ('x = a + b; y = a + b', 'x = a'):
        with pytest.raises(ablations.AblationRefused, match='occurs'): ablations.ablated_source(src, 'a + b', 'c', 't')

def _input_batch_025(tmp_path):
    "vLLM 0.25.0's `input_batch.py`, from its wheel in .cache/vllm-wheels (or VLLM_WHEEL_DIR), or skip."
    d = Path(os.environ.get('VLLM_WHEEL_DIR', ROOT / '.cache' / 'vllm-wheels'))
    wheels = sorted(d.glob('vllm-0.25.0-*.whl'))
    if not wheels: pytest.skip('no vLLM 0.25.0 wheel here')
    name = 'vllm/v1/worker/gpu/input_batch.py'
    with zipfile.ZipFile(wheels[0]) as z: (tmp_path / 'input_batch.py').write_bytes(z.read(name))
    return tmp_path / 'input_batch.py'

def test_guard_ablation_overwrites_the_prompt_tail_in_vllms_own_kernel(tmp_path, monkeypatch):
    pytest.importorskip('triton')
    file = _input_batch_025(tmp_path)
    from triton.runtime.interpreter import InterpretedFunction
    from vllm_pd_spec.kernels.upstream import load_vllm_input_kernels
    from vllm_pd_spec.kernels.batches import row_spec, build_batch, prompt_overwrites
    vk = load_vllm_input_kernels(file, interpret=True)
    name, a = '_combine_sampled_and_draft_tokens_kernel', ablations.ABLATIONS['guard_off']
    b = build_batch([row_spec('tail', 10, 9, 1), row_spec('decode', 8, 12, 1), row_spec('prefill', 9, 0, 9)], k=1)
    args = ('input_ids', 'idx_mapping', 'last_sampled_tokens', 'query_start_loc', 'seq_lens', 'prefill_len', 'draft_tokens',
            'cu_num_logits', 'num_logits', 'num_new_sampled_tokens')
    def ids():
        kw = [b[n].clone() if hasattr(b[n], 'clone') else b[n] for n in args]
        vk.combine_sampled_and_draft_tokens(*kw)
        return kw[0]
    assert prompt_overwrites(b, ids()) == []  # 0.25.0 as shipped keeps x_N
    ablated = ablations.ablate_function(getattr(vk.module, name), a.old, a.new, 'guard_off', module=vk.module)
    monkeypatch.setattr(vk.module, name, InterpretedFunction(ablated.fn))
    assert prompt_overwrites(b, ids()) == [0]  # the tail row's x_N, and nothing else

def test_ordering_ablation_on_vllms_scheduler():
    vllm = pytest.importorskip('vllm')
    if not vllm.__version__.startswith('0.25.0'): pytest.skip(f'needs vLLM 0.25.0, found {vllm.__version__}')
    from vllm_pd_spec.audit.probes import real_scheduler_factory, replay_53514_scheduler, ASSERT_FIRES
    make = real_scheduler_factory()
    assert replay_53514_scheduler(make, 17, 16) == ASSERT_FIRES
    ablations.apply('ordering_53523')
    try: assert replay_53514_scheduler(make, 17, 16) == 16
    finally: ablations.remove()

def test_byte_tokenizer(tmp_path):
    pytest.importorskip('tokenizers')
    import ckpt
    ckpt.write_tokenizer(tmp_path)
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(str(tmp_path / 'tokenizer.json'))
    text = 'def f(x):\n\treturn x ~ é'
    assert t.encode(text).ids == list(text.encode()) and t.decode(list(text.encode())) == text
    assert t.token_to_id('<|endoftext|>') == 257 and t.get_vocab_size() == 258

def test_compare_against_standalone():
    c = experiments._compare([[1, 2, 3], [1, 9, 3], [7, 2, 3]], [[1, 2, 3]] * 3)
    assert (c['equal'], c['exact_match_rate'], c['first_divergence']) == (1, 1 / 3, [None, 1, 0])
    assert c['first_token_match_rate'] == 2 / 3 and c['mean_first_divergence'] == 0.5
