"""Speculative decoding against SmolLM2-135M-Instruct on this machine: tau and speedup over the same target's plain
KV-cached greedy decoding, in the same precision, measured side by side in one process.

    python bench/speculate.py --dflash runs/dflash/draft --eagle3 runs/eagle3/draft --tree-nodes 8

How it measures (these machines are noisy: run it with nothing else on the cores):
- target and drafters in one precision (`--precision auto`: fp32 on a CPU, since it verifies; `inference_precision`);
  `int8` decodes with the target's linears in int8, a scale per row (`decoding_target`): exact, another model;
- the held-out prompts (`heldout`: writing, reasoning, maths, code; the drafter recipes never train on them);
- a warm-up decode of every method first; then `--repeats` rounds, each decoding every prompt with every method in
  a rotated order (plain decoding included), so drift and contention hit all methods alike;
- tok/s per method and round over all prompts; the speedup is the median over rounds of (method / plain of the
  same round); tau, acceptance and losslessness are deterministic (greedy) and come from the first round;
- plain decoding is checked against transformers' `generate` in the same precision, timed in the same rotation (same
  tokens, and its speed); with `--plain-fp32`, the fp32 target's plain decoding is timed in the rotation too, so a
  precision's speedup can also be read against the other precision's plain decoding;
- the cost of a cycle in plain-step units: draft and verify time per cycle over plain decoding's time per token past
  the prompt; the prompt's prefill (the same both ways) is timed apart, and `decode_speedup_median` leaves it out."""

import json, statistics, sys, time
from typing import NamedTuple
from pathlib import Path
import torch
from mdlm_kit.drafts.chat_data import heldout_prompts
from mdlm_kit.core.config import add_config_flags, settings_for
from mdlm_kit.core.device import cpu_supports_bf16, inference_precision, machine_summary, resolve_device
from mdlm_kit.drafts.speculate import CYCLE, DecodeSettings, PromptSettings, chat_ids, decoding_products, load_draft
from mdlm_kit.drafts.speculate import lookup_store, make_proposer, set_draft_precision
from mdlm_kit.drafts.verification import (
    DecodeResult,
    inside_target,
    PromptLookupProposer,
    decode_tokens_per_s,
    plain_decode,
    speculative_decode,
    summarize_runs,
    SamplingParams,
)
from mdlm_kit.drafts.targets import TargetModel, decoding_target
from bench_flags import add_prompt_flags, bench_parser, prompt_settings


def _hf_generate(tgt, ids, n, eos):
    t0 = time.perf_counter()
    out = tgt.model.generate(
        torch.tensor([ids], device=tgt.device),
        max_new_tokens=n,
        do_sample=False,
        top_p=None,
        top_k=None,
        temperature=None,
        eos_token_id=eos,
        pad_token_id=eos,
    )
    return out[0, len(ids) :].tolist(), time.perf_counter() - t0


class Method(NamedTuple):
    "One decoder the bench times: its name, its drafter directory ('' for prompt lookup) and its settings."

    name: str
    path: str
    # what a cycle verifies, named as DecodeSettings names it
    tree_nodes: int = 0  # 0: a chain or a DFlash block
    num_draft_tokens: int | None = None  # a tree's depth
    min_confidence: float = 0.0
    runner_up: float = 0.0
    lookup_branch: int = 0
    precision: str = "same"  # the drafter's (set_draft_precision)
    store: bool = False  # the lookup fed by --lookup-store too


# the drafters a run measures, in this order: flag (and method name) -> (default directory, what it names)
DRAFT_DIRS = {
    "dflash": ("runs/dflash/draft", "a DFlash draft directory"),
    "dpace": ("", "a D-PACE-trained DFlash draft directory"),
    "eagle3": ("runs/eagle3/draft", "an EAGLE-3 draft directory"),
    "selfdraft": ("", "self-drafting adapters (mdlm-kit adapt's adapters/)"),
}


def _methods(args) -> list[Method]:
    out = []
    for name in DRAFT_DIRS:
        path = getattr(args, name)
        if not path:
            continue
        if not Path(path, "config.json").is_file():
            print(f"skipping {name}: no drafter at {path} (train one with nbs/27_drafter_recipes.ipynb)")
            continue
        k = {"eagle3": args.num_draft_tokens, "selfdraft": None}.get(name, args.dflash_draft_tokens)
        mine = [Method(name, path, num_draft_tokens=k)]
        # the same drafter, its drafts cut where it doubts
        mine += [
            Method(f"{name}-conf{c:g}", path, num_draft_tokens=k, min_confidence=c)
            for c in _floats(args.min_confidence)
        ]
        if name == "eagle3":
            mine += [Method(f"eagle3-k{int(n)}", path, num_draft_tokens=int(n)) for n in _floats(args.chain_lengths)]
            # each chain setting again, with the drafter's runner-ups beside its drafts
            mine += [m._replace(name=f"{m.name}+ru{r:g}", runner_up=r) for r in _floats(args.runner_up) for m in mine]
            if args.tree_nodes:
                mine.append(Method("eagle3-tree", path, args.tree_nodes, args.tree_depth))
        out += mine
        # each setting again, with prompt lookup's branch beside its drafts
        # and once more with --lookup-store, the branch fed by the store where the context has no match (NAME+plsN)
        for store in (False, True) if args.lookup_store else (False,):
            out += [
                m._replace(name=f"{m.name}+pl{'s' * store}{int(n)}", lookup_branch=int(n), store=store)
                for n in _floats(args.lookup_branch)
                for m in mine
            ]
    precisions = [x.strip() for x in args.draft_precision.split(",") if x.strip()] or ["same"]
    # each drafter once per precision
    out = [m if p == "same" else m._replace(name=f"{m.name}@{p}", precision=p) for p in precisions for m in out]
    if args.prompt_lookup:  # the drafter with no weights: a baseline every trained drafter should beat
        out.append(Method("prompt-lookup", "", num_draft_tokens=args.prompt_lookup))
        if args.lookup_store:
            out.append(Method("prompt-lookup+store", "", num_draft_tokens=args.prompt_lookup, store=True))
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = sorted(set(only) - {m.name for m in out})
    if unknown:
        raise SystemExit(f"--only names no method called {', '.join(unknown)}; the flags make {[m.name for m in out]}")
    return [m for m in out if m.name in only] if only else out


def cycle_costs(rounds: list[dict], steps: list[float], name: str, phase: str) -> list[float]:
    "Per round: the seconds method `name` spent in `phase` ('draft', 'verify') per cycle, over that round's step."
    out = []
    for g, step in zip(rounds, steps):
        seconds = sum(getattr(x, f"{phase}_time") for x in g[name])
        out.append(seconds / sum(len(x.cycles) for x in g[name]) / step)
    return out


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def measure(args, ps: PromptSettings, decoding: DecodeSettings, precision):
    """One precision: every method and plain decoding of `ps`'s prompts, interleaved over rounds, on `decoding`'s
    device; the metrics."""
    dev = resolve_device(decoding.device)
    prec = inference_precision(precision, dev, 1 + (args.num_draft_tokens or 5), verifies=True)
    tgt = decoding_target(args.target, dev, prec)  # int8: Int8RowsLinear and row_attention (lesson 14)
    tok, tables, eos = tgt.tokenizer, tgt.embeddings_and_head(), tgt.tokenizer.eos_token_id
    prompts = ps.load()
    kinds = (
        [p["kind"] for p in heldout_prompts(ps.num_prompts or None)]
        if ps.prompts == "heldout"
        else ["all"] * len(prompts)
    )
    ids = [chat_ids(tok, m) for m in prompts]
    methods = _methods(args)
    store = lookup_store(args.lookup_store, tok) if args.lookup_store else None  # NgramStore, lesson 15
    drafts = {  # each drafter once per precision; int8 linears stay int8 under --packed
        (m.path, m.precision): set_draft_precision(load_draft(m.path, dev), m.precision, prec.dtype)
        for m in methods
        if m.path
    }
    ref = None  # --plain-fp32: plain decoding of the fp32 target too, in the same rounds
    if args.plain_fp32 and prec.name != "fp32":
        ref = TargetModel.from_pretrained(args.target, device=dev, dtype=torch.float32)
    # the same products for plain decoding and every drafter alike, as `mdlm-kit speculate` sets them
    decoding_products(decoding, [tgt, *([ref] if ref else [])], drafts.values())

    def run(name, i):
        if name in ("plain", "plain-fp32"):
            return plain_decode(tgt if name == "plain" else ref, ids[i], ps.max_new_tokens, eos_token_id=eos)
        if name == "generate":  # transformers' own loop, in the same rounds: the check on plain decoding
            tokens, dt = _hf_generate(tgt, ids[i], ps.max_new_tokens, eos)
            return DecodeResult(tokens, total_time=dt)
        m = next(m for m in methods if m.name == name)
        own = store if m.store else None
        if not m.path:
            proposer = PromptLookupProposer(m.num_draft_tokens, store=own)
            return speculative_decode(tgt, proposer, ids[i], ps.max_new_tokens, SamplingParams(), 0, eos)
        cycle = {k: getattr(m, k) for k in CYCLE if k in m._fields}  # its settings, by their DecodeSettings names
        draft = drafts[m.path, m.precision]
        proposer = make_proposer(draft, tables, **cycle, lookup_store=own)
        with inside_target(draft, tgt):  # self-drafting (lesson 22a): the adapters are in for this run only
            return speculative_decode(tgt, proposer, ids[i], ps.max_new_tokens, SamplingParams(), 0, eos)

    names = ["plain"] + [m.name for m in methods]
    timed = names + ["generate"] + (["plain-fp32"] if ref else [])
    print(
        f"{len(prompts)} prompts, {ps.max_new_tokens} new tokens, {prec.name}, {torch.get_num_threads()} threads, "
        f"{args.repeats} rounds; warming up",
        flush=True,
    )
    for n in timed:
        run(n, 0)
    rounds = []  # per round: {method: [DecodeResult per prompt]}
    for r in range(args.repeats):
        got = {n: [None] * len(ids) for n in timed}
        for i in range(len(ids)):
            s = (r + i) % len(timed)
            for n in timed[s:] + timed[:s]:
                got[n][i] = run(n, i)
        rounds.append(got)
        print(f"round {r + 1}/{args.repeats} done", flush=True)
    plain0 = rounds[0]["plain"]
    hf_same = sum(h.tokens == p.tokens for h, p in zip(rounds[0]["generate"], plain0))
    tps = lambda rs: sum(len(x.tokens) for x in rs) / sum(x.total_time for x in rs)
    plain_tps = statistics.median(tps(g["plain"]) for g in rounds)
    out = {
        "device": str(dev),
        "precision": prec.name,
        "threads": torch.get_num_threads(),
        "prompts": ps.prompts,
        "n_prompts": len(ids),
        "max_new_tokens": ps.max_new_tokens,
        "repeats": args.repeats,
        "lookup_store": args.lookup_store,
        "lookup_store_tokens": 0 if store is None else len(store.tokens),
        "plain_tokens_per_s": round(plain_tps, 2),
        "hf_generate": {
            "same_tokens": f"{hf_same}/{len(ids)}",
            "tokens_per_s": round(statistics.median(tps(g["generate"]) for g in rounds), 2),
            "plain_over_generate": round(statistics.median(tps(g["plain"]) / tps(g["generate"]) for g in rounds), 3),
        },
    }
    if ref:  # the fp32 target's plain decoding: is the faster precision faster than the other one's plain decoding?
        out["plain_fp32_tokens_per_s"] = round(statistics.median(tps(g["plain-fp32"]) for g in rounds), 2)
        out["plain_over_plain_fp32"] = round(
            statistics.median(tps(g["plain"]) / tps(g["plain-fp32"]) for g in rounds), 3
        )
        print(f"plain fp32 decoding {out['plain_fp32_tokens_per_s']} tok/s ({out['plain_over_plain_fp32']}x)")
    # the unit of cycle costs: plain decoding's seconds per token past the prompt (the prefill is the same both ways)
    steps = [1 / decode_tokens_per_s(g["plain"]) for g in rounds]  # each round's own unit: the machine drifts
    out["plain_step_ms"] = round(statistics.median(steps) * 1e3, 2)
    out["plain_step_ms_by_round"] = [round(x * 1e3, 4) for x in steps]
    out["plain_prefill_s"] = round(statistics.median(sum(x.prefill_time for x in g["plain"]) for g in rounds), 3)
    print(
        f"plain decoding {plain_tps:.1f} tok/s; HF generate {out['hf_generate']['tokens_per_s']} tok/s, "
        f"same tokens on {hf_same}/{len(ids)} prompts; a step {out['plain_step_ms']} ms past the prompts' "
        f"prefill ({out['plain_prefill_s']} s in all)"
    )
    print(
        f"{'method':20} {'tau':>5} {'speedup':>8} {'(decode)':>8} {'tok/s':>7} {'lossless':>9} {'draft/cyc':>10} "
        f"{'verify/cyc':>11}  "
        f"tau by kind; acceptance by position"
    )
    for n in names[1:]:
        m = summarize_runs(rounds[0][n], plain0, plain0)
        ratios = [tps(g[n]) / tps(g["plain"]) for g in rounds]
        m["speedup_median"] = round(statistics.median(ratios), 3)
        m["speedup_by_round"] = [round(x, 3) for x in ratios]
        # past the prompt: what the drafter changes, without the prefill both ways share
        m["decode_speedup_median"] = statistics.median(
            summarize_runs(g[n], g["plain"])["decode_speedup"] for g in rounds
        )
        m["tokens_per_s_median"] = round(statistics.median(tps(g[n]) for g in rounds), 2)
        if ref:
            m["speedup_vs_plain_fp32_median"] = round(
                statistics.median(tps(g[n]) / tps(g["plain-fp32"]) for g in rounds), 3
            )
        for phase in ("draft", "verify"):  # per round against that round's step, then the median
            by = cycle_costs(rounds, steps, n, phase)
            m[f"{phase}_steps_per_cycle"] = round(statistics.median(by), 2)
            m[f"{phase}_steps_by_round"] = [round(x, 3) for x in by]
        m["tau_by_kind"] = {}
        for kind in dict.fromkeys(kinds):
            rs = [x for x, kd in zip(rounds[0][n], kinds) if kd == kind]
            m["tau_by_kind"][kind] = round(sum(sum(x.cycles) for x in rs) / sum(len(x.cycles) for x in rs), 2)
        m["lossless_prompts"] = f"{sum(x.tokens == p.tokens for x, p in zip(rounds[0][n], plain0))}/{len(ids)}"
        out[n] = m
        print(
            f"{n:20} {m['tau_pooled']:5.2f} {m['speedup_median']:8.2f} {m['decode_speedup_median']:8.2f} "
            f"{m['tokens_per_s_median']:7.1f} "
            f"{m['lossless_prompts']:>9} {m['draft_steps_per_cycle']:10.2f} {m['verify_steps_per_cycle']:11.2f}  "
            f"{m['tau_by_kind']}; {m['acceptance_by_position'][:6]}"
            + (f"; {m['speedup_vs_plain_fp32_median']}x plain fp32" if ref else "")
        )
    return out


def main():
    ap = bench_parser(__doc__, "speculate.json")
    for name, (default, what) in DRAFT_DIRS.items():
        ap.add_argument(f"--{name}", default=default, help=f"{what} ('' to skip)")
    ap.add_argument(
        "--precision",
        default="fp32,bf16",
        help="comma list: the whole measurement runs once per precision, "
        "each method against plain decoding in the same precision ('auto': see inference_precision)",
    )
    add_prompt_flags(ap, "heldout", num_prompts=0, max_new_tokens=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--num-draft-tokens",
        type=int,
        default=None,
        help="EAGLE-3 chain length (default: default_draft_tokens, 3 on a CPU)",
    )
    ap.add_argument(
        "--dflash-draft-tokens",
        type=int,
        default=None,
        help="DFlash drafts verified per cycle (default: default_draft_tokens, 3 on a CPU)",
    )
    ap.add_argument(
        "--tree-nodes", type=int, default=0, help="also run the EAGLE-3 drafter with a dynamic tree of this many nodes"
    )
    ap.add_argument("--tree-depth", type=int, default=None, help="tree depth (default: the chain length)")
    ap.add_argument(
        "--chain-lengths", default="", help="comma list: also run the EAGLE-3 chain with these lengths (eagle3-kN)"
    )
    ap.add_argument(
        "--min-confidence",
        default="",
        help="comma list: also run each drafter with its drafts cut below this drafter probability (NAME-confC)",
    )
    ap.add_argument(
        "--prompt-lookup",
        type=int,
        default=0,
        help="also run the weightless prompt-lookup drafter with this many drafts",
    )
    ap.add_argument(
        "--lookup-branch",
        default="",
        help="comma list: also run each drafter setting with prompt lookup's continuation of this many tokens "
        "grafted beside its drafts (NAME+plN)",
    )
    ap.add_argument(
        "--lookup-store",
        default="",
        help="a JSONL of conversations (the drafter's training data): each lookup branch and --prompt-lookup once "
        "more, fed by its n-grams where the answer's context has no match (NAME+plsN, prompt-lookup+store)",
    )
    ap.add_argument(
        "--runner-up",
        default="",
        help="comma list: also run each EAGLE-3 chain setting with the drafter's runner-ups beside its drafts where "
        "the drafter gives a runner-up's path at least this probability (NAME+ruP)",
    )
    ap.add_argument(
        "--draft-precision",
        default="same",
        help="comma list: each drafter method once per drafter precision (same as the target, fp32, bf16, int8: "
        "NAME@P)",
    )
    ap.add_argument(
        "--only", default="", help="comma list: of the methods the other flags make, run only these (default: all)"
    )
    # the machine side as mdlm-kit speculate declares it, for plain decoding and every method alike
    add_config_flags(ap, DecodeSettings, only=("device", "one_row", "packed"))
    ap.add_argument(
        "--plain-fp32",
        action="store_true",
        help="for a precision other than fp32: plain decoding of the fp32 target too, in the same rounds (a second "
        "copy in memory), and each method's speedup over it",
    )
    args = ap.parse_args()
    decoding, ps = settings_for(args, DecodeSettings), prompt_settings(args)
    out = {}
    for name in args.precision.split(","):
        out[name] = measure(args, ps, decoding, name.strip())
        out[name]["command"] = "python " + " ".join(sys.argv)
        out[name]["cpu_native_bf16"] = cpu_supports_bf16()  # which kernels a CPU's figures came from
        out[name]["machine"] = machine_summary()  # and the flags and paths behind them
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
