"""What the EAGLE-3 drafter's KV cache saves: the time to propose a chain after a prefix of n committed tokens, with the
cache grown cycle by cycle (one `extend` of the newly accepted positions, then the chain) against recomputing step 0
over the whole prefix every cycle (what the decoder did before it had the cache). SmolLM2-135M's shapes, one process,
warm-up, interleaved rounds, medians.

    python bench/eagle3_cache.py [--draft runs/eagle3/draft] [--precision fp32]"""

import json, statistics, time
from pathlib import Path
import torch
from mdlm_kit.core.device import inference_precision, machine_summary, resolve_device
from mdlm_kit.drafts.eagle3 import Eagle3Config, Eagle3ContextCache, Eagle3DraftModel
from mdlm_kit.drafts.eagle3 import eagle3_propose
from mdlm_kit.drafts.speculate import load_draft
from mdlm_kit.drafts.verification import SamplingParams
from mdlm_kit.drafts.targets import decoding_target
from bench_flags import bench_parser


def main():
    ap = bench_parser(__doc__, "eagle3_cache.json", target=False)
    ap.add_argument("--draft", default="runs/eagle3/draft", help="a saved EAGLE-3 drafter (an untrained one if absent)")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--prefixes", default="64,256,1024")
    ap.add_argument("--chain", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    dev = resolve_device("auto")
    prec = inference_precision(a.precision, dev)
    tgt, dtype = decoding_target("smollm2", dev, prec), prec.dtype
    tables = tgt.embeddings_and_head()
    if Path(a.draft, "config.json").is_file():
        draft = load_draft(a.draft, dev, dtype).eval()
    else:
        draft = Eagle3DraftModel(Eagle3Config.from_target(tgt.config, ttt_length=a.chain + 1)).to(dev).eval()
    torch.manual_seed(0)
    sp, out = SamplingParams(), {}
    for n in [int(x) for x in a.prefixes.split(",")]:
        ids = torch.randint(100, 40000, (1, n + 4), device=dev)
        aux = torch.randn(1, n + 3, 3 * tgt.hidden_size, device=dev, dtype=dtype)
        cached, recomputed = [], []
        for r in range(a.rounds + 1):  # round 0 warms up
            base = Eagle3ContextCache(draft, tables).extend(ids[:, 1 : n + 1], aux[:, :n])
            t0 = time.perf_counter()
            base.extend(ids[:, n + 1 : n + 4], aux[:, n : n + 3])  # a cycle commits 3 positions
            eagle3_propose(draft, base, a.chain, sp)
            t1 = time.perf_counter()
            fresh = Eagle3ContextCache(draft, tables).extend(ids[:, 1 : n + 4], aux[:, : n + 3])  # step 0 over it all
            eagle3_propose(draft, fresh, a.chain, sp)
            t2 = time.perf_counter()
            if r:
                cached.append((t1 - t0) * 1e3)
                recomputed.append((t2 - t1) * 1e3)
        out[n] = {
            "cached_ms": round(statistics.median(cached), 2),
            "recomputed_ms": round(statistics.median(recomputed), 2),
        }
        print(
            f"prefix {n:5d}: drafting a chain of {a.chain} with the cache {out[n]['cached_ms']:7.2f} ms, recomputing "
            f"step 0 {out[n]['recomputed_ms']:7.2f} ms ({out[n]['recomputed_ms'] / out[n]['cached_ms']:.1f}x)",
            flush=True,
        )
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(
        json.dumps(
            {
                "precision": a.precision,
                "chain": a.chain,
                "machine": machine_summary(),
                "threads": torch.get_num_threads(),
                **{str(k): v for k, v in out.items()},
            },
            indent=1,
        )
    )
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
