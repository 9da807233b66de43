"The NIXL transfer-set probe: registered with the audit, 'not present' without vLLM, and its saved rows for the audited releases."
import json
from pathlib import Path
from vllm_pd_spec.audit.harness import registered_probes, locate
from vllm_pd_spec.audit.probes_transfer import probe_nixl_draft_transfer, DRAFTER_LAYOUTS, planner_drops_groups

def test_registered_after_the_six():
    assert probe_nixl_draft_transfer in registered_probes() and probe_nixl_draft_transfer.fix == 7

def test_without_vllm_not_present():
    if locate('vllm.v1.kv_cache_interface') is not None: return  # the vLLM venv asserts the verdicts (saved rows below)
    (f,) = probe_nixl_draft_transfer()
    assert f.verdict == 'not present' and 'transfer_group_index_by_layer' in f.location and planner_drops_groups() == 'no planner'

def test_saved_rows_send_every_drafter_group():
    "The saved run: 0.33.0 and 0.34.0 send every drafter layer of every layout (fixed); 0.27.1 has no projection (not present)."
    saved = {r['vllm']: r for r in json.loads((Path(__file__).parent.parent / 'nbs/runs/transfer_probe.json').read_text())['rows']}
    assert saved['0.27.1']['row']['verdict'] == 'not present'
    for v in ('0.33.0', '0.34.0'):
        assert saved[v]['row']['verdict'] == 'fixed' and saved[v]['per_layout'] == dict.fromkeys(DRAFTER_LAYOUTS, 'sent')
        assert saved[v]['row']['note'].endswith('(by source): no')
