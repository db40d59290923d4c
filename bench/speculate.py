"""Speculative decoding against SmolLM2-135M-Instruct on this machine: tau and speedup over the same target's plain
KV-cached greedy decoding, measured in the same run (these machines are noisy; compare only numbers from one run).

    python bench/speculate.py --dflash runs/dflash8/draft --dpace runs/dpace8/draft --eagle3 runs/eagle3/draft \
        --tree-nodes 6 --num-prompts 8

The prompts are the kit's own (the tail of the embedded prompt set, which the drafter recipes do not train on)."""
import argparse, json, time
from pathlib import Path
import torch
from mdlm_kit.speculative import SamplingParams, load_draft, load_prompts, speculate
from mdlm_kit.targets import TargetModel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="smollm2")
    ap.add_argument("--dflash", default="runs/dflash8/draft", help="a DFlash draft directory ('' to skip)")
    ap.add_argument("--dpace", default="runs/dpace8/draft", help="a D-PACE-trained DFlash draft directory ('' to skip)")
    ap.add_argument("--eagle3", default="runs/eagle3/draft", help="an EAGLE-3 draft directory ('' to skip)")
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--num-draft-tokens", type=int, default=4, help="EAGLE-3 chain length (and tree depth)")
    ap.add_argument("--tree-nodes", type=int, default=0, help="also run the EAGLE-3 drafter with a dynamic tree of this many nodes")
    ap.add_argument("--dflash-draft-tokens", default="", help="comma list: also run both DFlash drafters verifying only this many "
                    "of each block's drafts (e.g. 1,2,3); the default verifies all block_size-1")
    ap.add_argument("--output", default="bench/results/speculate.json")
    args = ap.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    tgt = TargetModel.from_pretrained(args.target)
    prompts = load_prompts("embedded", args.num_prompts)
    rows = {}
    runs = [("dflash", args.dflash, 0, None), ("dpace", args.dpace, 0, None), ("eagle3", args.eagle3, 0, args.num_draft_tokens)]
    if args.tree_nodes: runs.append(("eagle3-tree", args.eagle3, args.tree_nodes, args.num_draft_tokens))
    for k in [int(v) for v in args.dflash_draft_tokens.split(",") if v.strip()]:
        runs += [(f"dflash-k{k}", args.dflash, 0, k), (f"dpace-k{k}", args.dpace, 0, k)]
    for name, path, tree, k in runs:
        if not path: continue
        if not Path(path, "config.json").is_file():
            print(f"skipping {name}: no drafter at {path} (train one with the recipe in nbs/18_drafter_recipes.ipynb)"); continue
        t0 = time.perf_counter()
        rows[name] = speculate(tgt, load_draft(path), prompts, args.max_new_tokens, SamplingParams(),
                               k, baseline=True, progress=False, tree_nodes=tree)
        rows[name].update(path=path, wall_s=round(time.perf_counter() - t0, 1))
        print(f"{name}: done in {rows[name]['wall_s']} s", flush=True)
    print(f"{'drafter':12} {'tau':>6} {'tok/s':>8} {'plain tok/s':>12} {'speedup':>8} {'lossless':>9} {'draft/cycle':>12} "
          f"{'verify/cycle':>13}  acceptance by position")
    for name, r in rows.items():
        cycles = r["cycles"]; step = 1 / r["baseline_tokens_per_s"]   # cycle costs in plain-step units
        r["draft_steps_per_cycle"] = round(r["draft_time_s"] / cycles / step, 2); r["verify_steps_per_cycle"] = round(r["verify_time_s"] / cycles / step, 2)
        print(f"{name:12} {r['tau_pooled']:6.2f} {r['tokens_per_s']:8.1f} {r['baseline_tokens_per_s']:12.1f} {r['speedup']:8.2f} "
              f"{str(r['lossless']):>9} {r['draft_steps_per_cycle']:12.2f} {r['verify_steps_per_cycle']:13.2f}  {r['acceptance_by_position'][:6]}")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps({"device": str(tgt.device), "threads": torch.get_num_threads(), **rows}, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
