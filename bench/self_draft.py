"""Self-drafting adapters (nbs/22a_self_draft.ipynb) measured on the held-out prompts, none of which they trained on:

- as a diffusion LM: `denoise` answers each prompt (greedy, blocks of the adapters' size, `--thresholds`); tokens per
  forward (the prompt's forward included: plain decoding makes 1), and the answers' NLL under the target (fp32,
  adapters inert) against the NLL of the target's own greedy answers to the same prompts (`plain_decode`), token-
  weighted means;
- the same for the untrained adapters (mask rows that know nothing yet), the "before";
- as a drafter: greedy speculative decoding of every prompt (fp32, untimed): tau and losslessness against the plain
  answers; the speed from a `bench/speculate.py --selfdraft` run (`--speculate`, one JSON a precision set): its speedup
  against the fastest plain decoding of the target in that run (whichever precision), and its own losslessness.

Writes one JSON with the fields the issue names (`tokens_per_forward`, `nll_ratio`, `tau`, `speedup`, `lossless`,
`prompts`) under `metrics`, the commands, the training time (from the run's events and its CPU log) and one example.

    python bench/self_draft.py --run runs/selfdraft/adapt --speculate bench/results/self_draft_speculate.json \\
        --output nbs/data/self_draft.json"""

import json, sys, time
from pathlib import Path
import torch
from mdlm_kit.core.checkpoint import read_events
from mdlm_kit.core.device import machine_summary
from mdlm_kit.drafts.selfdraft import SelfDraftProposer, denoise, fresh_adapters, load_self_draft
from mdlm_kit.drafts.speculate import chat_ids
from mdlm_kit.drafts.targets import TargetModel
from mdlm_kit.drafts.verification import plain_decode, speculative_decode
from bench_flags import add_prompt_flags, bench_parser, prompt_settings


@torch.no_grad()
def answer_nll(target, prompt_ids: list[int], answer: list[int]) -> tuple[float, int]:
    "Summed NLL (nats) of `answer` after `prompt_ids` under the target, and its token count."
    ids = torch.tensor([prompt_ids + answer])
    logits = target.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    return float(torch.nn.functional.cross_entropy(logits, torch.tensor(answer), reduction="sum")), len(answer)


def measure_denoise(target, adapters, prompts, max_new: int, threshold: float, eos: int) -> dict:
    "Answers, tokens per forward and the answers' NLL under the target, over `prompts` (chat ids)."
    answers, fwd, nll, n = [], 0, 0.0, 0
    t0 = time.perf_counter()
    for ids in prompts:
        r = denoise(target, adapters, ids, max_new, threshold, eos)
        answers.append(r["tokens"])
        fwd += r["forwards"]
    seconds = time.perf_counter() - t0
    adapters.detach()  # scored by the target alone
    for ids, a in zip(prompts, answers):
        s, k = answer_nll(target, ids, a)
        nll, n = nll + s, n + k
    adapters.attach(target)
    tokens = sum(len(a) for a in answers)
    return {
        "answers": answers,
        "tokens_per_forward": tokens / fwd,
        "nll": nll / n,
        "tokens": tokens,
        "seconds": seconds,
    }


def speculate_figures(path: str) -> dict:
    "tau, losslessness and the speedup over the fastest plain decoding, from a bench/speculate.py --selfdraft JSON."
    runs = json.loads(Path(path).read_text())
    fastest_plain = max(r["plain_tokens_per_s"] for r in runs.values())
    best = max(runs, key=lambda p: runs[p]["selfdraft"]["tokens_per_s_median"])
    m = runs[best]["selfdraft"]
    ok, total = (int(x) for x in m["lossless_prompts"].split("/"))
    return {
        "tau": m["tau_pooled"],
        "speedup": round(m["tokens_per_s_median"] / fastest_plain, 3),
        "speedup_same_precision": m["speedup_median"],
        "lossless": ok == total,
        "lossless_prompts": m["lossless_prompts"],
        "precision": best,
        "fastest_plain_precision": max(runs, key=lambda p: runs[p]["plain_tokens_per_s"]),
        "verify_steps_per_cycle": m["verify_steps_per_cycle"],
        "command": runs[best]["command"],
    }


def train_figures(run: Path) -> dict:
    "Steps, wall minutes (start to last checkpoint) and the CPU minutes the adaptation's process used, if logged."
    ev = read_events(run / "events.jsonl")
    start = next(e for e in ev if e["event"] == "start")
    last = [e for e in ev if e["event"] == "checkpoint"][-1]
    out = {"steps": last["step"], "minutes": (last["time"] - start["time"]) / 60}
    cpu_log = run.parent / "adapt_cpu.log"  # `date +%s utime stime` (clock ticks) of the process, every 20 s
    if cpu_log.is_file():
        *_, line = cpu_log.read_text().split("\n")[:-1]
        _, ut, st = line.split()
        out["cpu_minutes"] = (int(ut) + int(st)) / 100 / 60
    out["eval"] = [e for e in ev if e["event"] == "eval"]
    cfg = json.loads((run / "adapt_config.json").read_text())
    return out | {"config": cfg}


def tokens_trained(cfg: dict, steps: int, tokenizer) -> dict:
    "The conversations, the epochs and (from their mean length) about how many tokens `steps` steps ran through."
    from mdlm_kit.drafts.chat_data import build_chat_dataset

    data = build_chat_dataset(cfg["data"], tokenizer, cfg["max_length"], min_loss_tokens=cfg["block_size"], log=print)
    mean = sum(len(x["input_ids"]) for x in data) / len(data)
    seen = steps * cfg["batch_size"]
    return {"conversations": len(data), "epochs": round(seen / len(data), 2), "tokens": round(seen * mean)}


def adapt_command(cfg: dict, run: Path) -> str:
    "The `mdlm-kit adapt` command line of the run's settings `cfg` (those that differ from the defaults)."
    from dataclasses import asdict
    from mdlm_kit.drafts.selfdraft import AdaptSettings

    base = asdict(AdaptSettings())
    flags = [f"--{k.replace('_', '-')} {v}" for k, v in cfg.items() if v != base[k]]
    return " ".join(["mdlm-kit adapt", *flags, f"--output-dir {run}"])


def main():
    ap = bench_parser(__doc__, "self_draft.json")
    ap.add_argument("--run", default="runs/selfdraft/adapt", help="the mdlm-kit adapt run (its adapters/ is measured)")
    ap.add_argument("--speculate", default="", help="bench/speculate.py --selfdraft results to take tau and speed from")
    ap.add_argument("--thresholds", default="0.9,0.7,0.5", help="comma list of denoise thresholds (the first is shown)")
    add_prompt_flags(ap, "heldout", num_prompts=0, max_new_tokens=64)
    args = ap.parse_args()
    run = prompt_settings(args)
    target = TargetModel.from_pretrained(args.target)
    tok, eos = target.tokenizer, target.tokenizer.eos_token_id
    msgs = run.load()
    prompts = [chat_ids(tok, m) for m in msgs]
    plain = [plain_decode(target, ids, run.max_new_tokens, eos_token_id=eos).tokens for ids in prompts]
    plain_nll = [answer_nll(target, ids, a) for ids, a in zip(prompts, plain)]
    base = sum(s for s, _ in plain_nll) / sum(k for _, k in plain_nll)
    _, ad = load_self_draft(Path(args.run) / "adapters", target=target)
    runs = {}
    for th in [float(x) for x in args.thresholds.split(",")]:
        runs[th] = measure_denoise(target, ad, prompts, run.max_new_tokens, th, eos)
        print(
            f"threshold {th}: {runs[th]['tokens_per_forward']:.2f} tokens/forward, NLL {runs[th]['nll']:.3f} "
            f"({runs[th]['nll'] / base:.2f}x the target's own {base:.3f})",
            flush=True,
        )
    drafted = [
        speculative_decode(target, SelfDraftProposer(ad), ids, run.max_new_tokens, eos_token_id=eos) for ids in prompts
    ]
    same = sum(r.tokens == p for r, p in zip(drafted, plain))
    tau_all = sum(sum(r.cycles) for r in drafted) / sum(len(r.cycles) for r in drafted)
    print(f"as its own drafter (fp32, untimed): lossless on {same}/{len(prompts)}, tau {tau_all:.2f}", flush=True)
    ad.detach()
    fresh = fresh_adapters(target, ad.config.block_size, ad.config.rank, ad.config.alpha)  # as the adaptation starts
    fresh.attach(target)
    th0 = float(args.thresholds.split(",")[0])
    before = measure_denoise(target, fresh, prompts, run.max_new_tokens, th0, eos)
    fresh.detach()
    shown = runs[th0]
    tr = train_figures(Path(args.run))
    out = {
        "bench_command": "python " + " ".join(sys.argv),
        "adapt_command": adapt_command(tr["config"], Path(args.run)),
        "machine": machine_summary(),
        "block_size": ad.config.block_size,
        "threshold": th0,
        "train": tr | tokens_trained(tr["config"], tr["steps"], tok),
        "target_nll": round(base, 4),
        "by_threshold": {
            str(th): {
                "tokens_per_forward": round(r["tokens_per_forward"], 3),
                "nll": round(r["nll"], 4),
                "nll_ratio": round(r["nll"] / base, 3),
                "seconds": round(r["seconds"], 1),
            }
            for th, r in runs.items()
        },
        "untrained": {
            "tokens_per_forward": round(before["tokens_per_forward"], 3),
            "nll_ratio": round(before["nll"] / base, 3),
        },
        "drafting_all_prompts": {"lossless_prompts": f"{same}/{len(prompts)}", "tau": round(tau_all, 3)},
        "metrics": {
            "tokens_per_forward": round(shown["tokens_per_forward"], 3),
            "nll_ratio": round(shown["nll"] / base, 3),
            "prompts": len(prompts),
            "lossless": same == len(prompts),
            "tau": round(tau_all, 3),
        },
        "example": {
            "prompt": msgs[0][-1]["content"],
            "smollm2": tok.decode(plain[0], skip_special_tokens=True),
            "untrained": tok.decode(before["answers"][0], skip_special_tokens=True),
            "adapted": tok.decode(shown["answers"][0], skip_special_tokens=True),
        },
    }
    if args.speculate:
        sp = speculate_figures(args.speculate)
        out["speculate_command"] = sp.pop("command")
        out["speculate"] = sp
        out["metrics"]["speedup"] = sp["speedup"]  # tau and losslessness over every prompt come from the run above
        out["metrics"]["lossless"] = out["metrics"]["lossless"] and sp["lossless"]
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
