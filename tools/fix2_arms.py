"""Fix 2's arms on any models, one process per setting (by default the conv MTP variant, ours, text-attn-convmtp, and text-attn, whose target it shares): greedy by default, every
arm, k = 2, 3, 4, three disjoint sets of 16 held-out prompts (the full sweep's sets), 128 tokens each, float64 on CPU;
vLLM's acceptance, acceptance by decode step, the census against the contract (a conv depth's state included). The
settings run through the experiment's own `run_settings`, one process per setting, one thread each. Writes one JSON
file, rewritten as settings finish: the rows, `summarize(rows)` and the time taken.

    PYTHONPATH=. python3 tools/fix2_arms.py --out nbs/runs/fix2_convmtp.json            # 16 cores: a few minutes
    PYTHONPATH=. python3 tools/fix2_arms.py --ks 2 --seeds 0 --num-prompts 1 --max-tokens 8 --out /tmp/fix2_convmtp_dry.json
"""
import argparse, json, os, platform, time

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--models', nargs='+', default=['text-attn-convmtp', 'text-attn'])
    ap.add_argument('--ks', nargs='+', type=int, default=[2, 3, 4])
    ap.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    ap.add_argument('--temperature', type=float, default=0.0, help='0 for greedy; the full sweep also runs 1.0')
    ap.add_argument('--num-prompts', type=int, default=16); ap.add_argument('--max-tokens', type=int, default=128)
    ap.add_argument('--processes', type=int, default=os.cpu_count()); ap.add_argument('--out', required=True)
    a = ap.parse_args(argv)
    from vllm_pd_spec.experiments.backoff import run_settings, summarize, PROMPT_LEN, ARMS
    settings = [(m, k, a.temperature, s) for m in a.models for k in a.ks for s in a.seeds]
    setup = dict(models=a.models, ks=a.ks, seeds=a.seeds, num_prompts=a.num_prompts, prompt_len=PROMPT_LEN, max_tokens=a.max_tokens,
                 temperature=a.temperature, dtype='float64', arms={n: x.what for n, x in ARMS.items()}, machine=platform.processor() or platform.machine(),
                 cpus=os.cpu_count())
    t0, finished, times = time.time(), [], {}
    def save(rows:list)->dict:
        out = dict(setup=setup, complete=len(times) == len(settings), seconds=round(time.time() - t0, 1), setting_seconds=times,
                   rows=rows, summary=summarize(rows))
        with open(a.out, 'w') as f: json.dump(out, f, indent=1, default=str)
        return out
    def on_setting(rows:list, seconds:float):  # the file is rewritten as settings finish: a cut-off run keeps what it did
        finished.extend(rows)
        times[f"{rows[0]['model']} k={rows[0]['k']} seed={rows[0]['seed']}"] = seconds
        save(finished)
    out = save(run_settings(settings, a.num_prompts, a.max_tokens, processes=a.processes, on_setting=on_setting))
    bad = [r for r in out['rows'] if r['contract_mismatches'] or r['lossless'] is False]
    print(f"{len(out['rows'])} arm runs in {out['seconds']} s; census = contract and lossless in all: {not bad}")

if __name__ == '__main__': main()
