"""Renumber the notebooks so that they read in order: no notebook imports a module whose notebook comes later.

    python tools/renumber.py            # git mv every mapped notebook, rewrite the lines that name notebooks
    python tools/renumber.py --check    # print what would move; change nothing
    python tools/renumber.py --resolve  # after a merge of a branch that still has the old names: re-merge each
                                        # conflicted file with the names rewritten in all three versions

Merging a branch written against the old names: `git merge B`; where it stops on conflicts, `--resolve` merges
each conflicted file again from its base, ours and theirs with the old names rewritten in each (`git merge-file`),
so the renames' own rewrites conflict with nothing and only real conflicts stay (marked, and named); then run the
script plainly (it renames the branch's new notebooks, if mapped, and rewrites what still names an old notebook),
`nbdev-export`, and commit.

The floors, in reading order (the number's first digit names the floor):

    0x  the registry, config, plotting, the contracts (fixes 1-6, then the four beyond the six and the waiting queue)
    1x  model (corpus, task, GDN, model, drafters, training)
    2x  kernels (fix 6's kernel, `kernels.combine`, and its kin)
    3x  engine (request ... scheduler, transport, speculators, CUDA graphs, runner, LLM engine, KV groups, offload, state exchange, NIXL)
    4x  experiments' kit (common, beyond kit), the experiments' figures
    5x  experiments (5N: fix N's experiment; 59a-59e: beyond the six), 6x: the other runs (model gates, soak)
    7x  audit, plugin, explain
    8x  CLI
    9x  reader's pages without a module (overview, glossary, findings, use; 95a-95f: the six fixes' pages, 96a-96f: the
        pages beyond the six, each after everything it imports; their contracts keep their 0x pages)

A notebook's name after its number stays the same, so its page keeps its address (nbdev drops the number:
`36_runner.ipynb` -> `runner.html`). The script is idempotent: a mapped notebook that is already renamed or no
longer exists is skipped; a notebook in `nbs/` that the mapping does not name (neither as old nor as new name)
stops it before anything changes, with the names printed, so it can be added to `MAPPING` first.
References are rewritten in the notebooks (sources and saved outputs), `tests/`, `tools/`, `Makefile`,
`mkdocs.yml`, `nbs/*.yml` and `pyproject.toml`; the package follows from `nbdev-export`.
"""
import re, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT/'nbs'

MAPPING = {  # old notebook name -> new (without .ipynb); identity entries are notebooks that keep their name
    # 0x: the registry, config, plotting, contracts
    '000_registry': '000_registry',
    '00_config': '00_config',
    '45_plotting': '00a_plotting',
    '00b_tables': '00b_tables',
    '01_lookahead': '01_lookahead',
    '02_prefill_backoff': '02_prefill_backoff',
    '03_truncation_ordering': '03_truncation_ordering',
    '04_dflash_slots': '04_dflash_slots',
    '05_gdn_decode_detection': '05_gdn_decode_detection',
    '06a_guard_contract': '06_guard_contract',
    '09a_draft_groups': '09a_draft_groups',
    '09b_state_slots': '09b_state_slots',
    '09c_draft_accounting': '09c_draft_accounting',
    '09d_connector_lookup': '09d_connector_lookup',
    '09k_waiting_queue': '09e_waiting_queue',
    '09f_lookahead_hashes': '09f_lookahead_hashes',
    # 1x: model
    '21a_corpus': '10_corpus',
    '21_task': '11_task',
    '20_gated_delta_rule': '12_gated_delta_rule',
    '22_model': '13_model',
    '23_drafters': '14_drafters',
    '24a_text_training': '15_text_training',
    '24_training': '16_training',
    # 2x: kernels
    '06_triton_kernel_guard': '20_triton_kernel_guard',
    '06d_fused_input_assembly': '21_fused_input_assembly',
    '06e_vllm_input_kernels': '22_vllm_input_kernels',
    '06f_kernel_batches': '23_kernel_batches',
    '06b_kernel_bench': '24_kernel_bench',
    # 3x: engine
    '10_engine_request': '30_engine_request',
    '11_engine_block_pool': '31_engine_block_pool',
    '12_engine_kv_cache': '32_engine_kv_cache',
    '13_engine_connector': '33_engine_connector',
    '13a_engine_outputs': '33a_engine_outputs',
    '14_engine_scheduler': '34_engine_scheduler',
    '13b_engine_toy_runner': '33b_engine_toy_runner',
    '15_engine_transport': '35_engine_transport',
    '35a_engine_spec_decode': '35a_engine_spec_decode',
    '35b_engine_cudagraph': '35b_engine_cudagraph',
    '25_runner': '36_runner',
    '36a_runner_on_gpu': '36a_runner_on_gpu',
    '26_llm_engine': '37_llm_engine',
    '16_engine_kv_groups': '38_engine_kv_groups',
    '17_engine_offload': '38a_engine_offload',
    '18_engine_state_exchange': '38b_engine_state_exchange',
    '19_nixl_transport': '39_nixl_transport',
    '19a_nixl_pd': '39a_nixl_pd',
    # 4x: experiments' kit
    '29_experiments_common': '40_experiments_common',
    '09f_beyond_kit': '41_beyond_kit',
    '41_figures': '41_figures',
    '30_reproduce': '81_reproduce',
    # 5x, 6x: experiments
    '01b_lookahead_experiment': '51_lookahead_experiment',
    '02b_prefill_backoff_experiment': '52_prefill_backoff_experiment',
    '03b_truncation_ordering_experiment': '53_truncation_ordering_experiment',
    '04b_dflash_slots_experiment': '54_dflash_slots_experiment',
    '05b_gdn_decode_detection_experiment': '55_gdn_decode_detection_experiment',
    '06c_kernel_guard_experiment': '56_kernel_guard_experiment',
    '09g_draft_groups_experiment': '59a_draft_groups_experiment',
    '09h_state_slots_experiment': '59b_state_slots_experiment',
    '09i_draft_accounting_experiment': '59c_draft_accounting_experiment',
    '09j_connector_lookup_experiment': '59d_connector_lookup_experiment',
    '09l_waiting_queue_experiment': '59e_waiting_queue_experiment',
    '59f_lookahead_hashes_experiment': '59f_lookahead_hashes_experiment',
    '24b_model_gates': '60_model_gates',
    '92_soak': '61_soak',
    # 7x: audit, plugin, explain
    '07a_audit_harness': '70_audit_harness',
    '07e_plugin': '71_plugin',
    '07_audit': '72_audit',
    '07b_audit_probes': '73_audit_probes',
    '07c_audit_probes_runner': '74_audit_probes_runner',
    '07d_audit_probes_connectors': '75_audit_probes_connectors',
    '07f_audit_probes_speculator': '76_audit_probes_speculator',
    '09e_audit_probes_beyond': '77_audit_probes_beyond',
    '77a_audit_probes_transfer': '77a_audit_probes_transfer',
    '77b_audit_probes_hashes': '77b_audit_probes_hashes',
    '08a_vllm_args': '78_vllm_args',
    '08_explain': '79_explain',
    # 8x: CLI
    '90_cli': '80_cli',
    # 9x: reader's pages without a module
    '40_pd_meets_spec': '90_pd_meets_spec',
    '41_glossary': '91_glossary',
    '42_findings': '92_findings',
    '91_use': '93_use',
    '94_vllm_itself': '94_vllm_itself',
    '95a_fix1_lookahead': '95a_fix1_lookahead',
    '95b_fix2_prefill_backoff': '95b_fix2_prefill_backoff',
    '95c_fix3_truncation_ordering': '95c_fix3_truncation_ordering',
    '95d_fix4_dflash_slots': '95d_fix4_dflash_slots',
    '95e_fix5_gdn_decode_detection': '95e_fix5_gdn_decode_detection',
    '95f_fix6_kernel_guard': '95f_fix6_kernel_guard',
    '96a_beyond_draft_groups': '96a_beyond_draft_groups',
    '96b_beyond_state_slots': '96b_beyond_state_slots',
    '96c_beyond_draft_accounting': '96c_beyond_draft_accounting',
    '96d_beyond_connector_lookup': '96d_beyond_connector_lookup',
    '96e_beyond_waiting_queue': '96e_beyond_waiting_queue',
    '96f_beyond_lookahead_hashes': '96f_beyond_lookahead_hashes',
}
UNNUMBERED = {'index'}  # notebooks that are no part of the order

# where references to notebooks are rewritten (globs under the repository root); the package follows from nbdev-export
REWRITE = ['nbs/*.ipynb', 'nbs/*.yml', 'tests/**/*.py', 'tests/**/*.json', 'tools/**/*.py', 'tools/**/*.sh',
           'Makefile', 'mkdocs.yml', 'pyproject.toml']

def _check_mapping():
    new = [v for k, v in MAPPING.items() if k != v]
    dup = sorted({v for v in MAPPING.values() if list(MAPPING.values()).count(v) > 1})
    assert not dup, f'MAPPING sends two notebooks to one name: {dup}'
    clash = sorted(set(new) & set(MAPPING))
    assert not clash, f'a new name is also an old name (the rewrite would not be idempotent): {clash}'
    stems = {}
    for v in MAPPING.values(): stems.setdefault(re.sub(r'^\d+[a-z]?_', '', v), []).append(v)
    same = {s: v for s, v in stems.items() if len(v) > 1}
    assert not same, f'two notebooks would share a page name: {same}'

def unmapped(nbs=NBS):
    "Notebooks in `nbs` that the mapping names neither as old nor as new name."
    known = set(MAPPING) | set(MAPPING.values()) | UNNUMBERED
    return sorted(p.stem for p in nbs.glob('*.ipynb') if p.stem not in known)

_NAME = None
def rewrite(text):
    "`text` with every old notebook name (a whole word: `01b_lookahead_experiment`, with or without .ipynb) renamed."
    global _NAME
    if _NAME is None:
        olds = sorted((k for k, v in MAPPING.items() if k != v), key=len, reverse=True)
        _NAME = re.compile(r'(?<![\w])(' + '|'.join(map(re.escape, olds)) + r')(?![\w])')
    return _NAME.sub(lambda m: MAPPING[m.group(1)], text)

def _files():
    seen = set()
    for g in REWRITE:
        for p in sorted(ROOT.glob(g)):
            if p.is_file() and p not in seen and p.name != 'renumber.py': seen.add(p); yield p

def _git(*args, **kw): return subprocess.run(['git', *args], cwd=ROOT, check=True, capture_output=True, **kw).stdout

def resolve():
    "Re-merge every conflicted file from its three versions with the old names rewritten in each; returns the paths left."
    import tempfile
    stages = {}
    for rec in _git('ls-files', '-u', '-z').split(b'\0'):
        if not rec: continue
        meta, path = rec.split(b'\t', 1)
        stages.setdefault(path.decode(), {})[int(meta.split()[2])] = meta.split()[1].decode()
    left = []
    for path, st in sorted(stages.items()):
        blob = lambda s: rewrite(_git('cat-file', 'blob', st[s]).decode())
        if set(st) == {1, 2} and blob(1) == blob(2):  # theirs deleted a notebook that ours only renamed
            _git('rm', '-q', path); print(f'deleted {path} (as theirs deleted it)'); continue
        if set(st) != {1, 2, 3}:
            print(f'{path}: not in all three versions (added or deleted on one side): resolve it by hand'); left.append(path); continue
        with tempfile.TemporaryDirectory() as tmp:
            fs = {}
            for s, name in ((2, 'ours'), (1, 'base'), (3, 'theirs')):
                fs[s] = Path(tmp)/name
                fs[s].write_bytes(blob(s).encode())
            r = subprocess.run(['git', 'merge-file', '-p', '-L', 'ours', '-L', 'base', '-L', 'theirs',
                                str(fs[2]), str(fs[1]), str(fs[3])], cwd=ROOT, capture_output=True)
        if r.returncode < 0 or r.returncode > 127: sys.exit(f'git merge-file failed on {path}: {r.stderr.decode()}')
        (ROOT/path).write_bytes(r.stdout)
        if r.returncode == 0: _git('add', path); print(f'resolved {path}')
        else: print(f'{path}: {r.returncode} conflict(s) left, not from the renames'); left.append(path)
    return left

def main(argv):
    _check_mapping()
    if '--resolve' in argv:
        left = resolve()
        sys.exit(f'{len(left)} file(s) left to resolve by hand: {", ".join(left)}' if left else None)
    dry = '--check' in argv
    left = unmapped()
    if left:
        sys.exit('notebooks not in tools/renumber.py MAPPING (add each, old name -> new, then run again): '
                 + ', '.join(f'{n}.ipynb' for n in left))
    moved = []
    for old, new in MAPPING.items():
        if old == new: continue
        src, dst = NBS/f'{old}.ipynb', NBS/f'{new}.ipynb'
        if not src.exists():
            if not dst.exists(): print(f'skipped: {old}.ipynb no longer exists (mapped to {new}.ipynb)')
            continue
        if dst.exists(): sys.exit(f'both {src.name} and {dst.name} exist: merge them by hand first')
        moved.append((old, new))
        if not dry: subprocess.run(['git', 'mv', str(src), str(dst)], cwd=ROOT, check=True)
    for old, new in moved: print(f'{"would move" if dry else "moved"} {old}.ipynb -> {new}.ipynb')
    changed = []
    for p in _files():
        txt = p.read_text()
        out = rewrite(txt)
        if out != txt:
            changed.append(p.relative_to(ROOT))
            if not dry: p.write_text(out)
    for p in changed: print(f'{"would rewrite" if dry else "rewrote"} {p}')
    print(f'{len(moved)} notebooks {"to move" if dry else "moved"}, {len(changed)} files {"to rewrite" if dry else "rewritten"}'
          + ('' if dry else '; now run nbdev-export (the package names its notebooks)'))

if __name__ == '__main__': main(sys.argv[1:])
