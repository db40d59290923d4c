"""How far a decoding precision moves the target from its fp32 self: perplexity on text, and greedy answers.

    python bench/target_quality.py --precisions fp32,bf16,int8

No timing: every figure is deterministic. For each precision the target is loaded as decoding loads it
(`decoding_target`: bf16 weights, or int8 linears with a scale per row) and
- perplexity: the Python standard library's docstrings (`stdlib_docstrings`, the text the MDLM lessons train on and
  the drafter recipes never see), shuffled with a fixed seed, joined and cut into `--windows` windows of `--window`
  tokens; the mean negative log-likelihood of every token but each window's first, exponentiated;
- answers: plain greedy decoding (`plain_decode`) of `--max-new-tokens` tokens on the held-out prompts, compared with
  the fp32 target's answers: how many are the same, and the median position of the first token that differs.
"""

import json, math, random, statistics, sys
import torch
import torch.nn.functional as F
from mdlm_kit.core.checkpoint import atomic_write_text
from mdlm_kit.core.device import inference_precision
from mdlm_kit.drafts.chat_data import heldout_prompts
from mdlm_kit.drafts.speculate import chat_ids
from mdlm_kit.drafts.verification import plain_decode
from mdlm_kit.drafts.targets import decoding_target
from mdlm_kit.text.data import stdlib_docstrings
from bench_flags import bench_parser


def text_windows(tok, n: int, width: int, seed: int = 0) -> torch.Tensor:
    "(n, width) token ids of the shuffled stdlib docstrings."
    docs = stdlib_docstrings()
    random.Random(seed).shuffle(docs)
    ids, k = [], 0
    while len(ids) < n * width:
        ids += tok("\n\n".join(docs[k : k + 200]))["input_ids"]
        k += 200
    return torch.tensor(ids[: n * width]).view(n, width)


@torch.no_grad()
def perplexity(tgt, windows: torch.Tensor) -> float:
    nll = 0.0
    for w in windows:
        logits = tgt.model(input_ids=w[None]).logits[0, :-1].float()
        nll += F.cross_entropy(logits, w[1:], reduction="sum").item()
    return math.exp(nll / (windows.numel() - len(windows)))


def first_difference(a: list[int], b: list[int]) -> int:
    "The position of the first token where two answers differ (the shorter length when one is the other's start)."
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main():
    ap = bench_parser(__doc__, "target_quality.json")
    ap.add_argument("--precisions", default="fp32,bf16,int8", help="comma list; fp32 first (the reference)")
    ap.add_argument("--windows", type=int, default=24)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--num-prompts", type=int, default=0, help="held-out prompts (0: all 24)")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    args = ap.parse_args()
    names = [p.strip() for p in args.precisions.split(",")]
    if names[0] != "fp32":
        raise SystemExit("--precisions must start with fp32: the answers are compared with the fp32 target's")
    cpu = torch.device("cpu")
    out, ref, windows = {"command": "python " + " ".join(sys.argv)}, None, None
    for name in names:
        tgt = decoding_target(args.target, cpu, inference_precision(name, cpu, verifies=True))
        if windows is None:  # one tokenizer for every precision: tokenise the text and the prompts once
            windows = text_windows(tgt.tokenizer, args.windows, args.window)
            ids = [chat_ids(tgt.tokenizer, p["conversations"]) for p in heldout_prompts(args.num_prompts or None)]
        answers = [
            plain_decode(tgt, x, args.max_new_tokens, eos_token_id=tgt.tokenizer.eos_token_id).tokens for x in ids
        ]
        ref = ref or answers
        firsts = [first_difference(a, b) for a, b in zip(answers, ref)]
        out[name] = {
            "perplexity": round(perplexity(tgt, windows), 3),
            "text_tokens": windows.numel(),
            "answers_equal_to_fp32": sum(a == b for a, b in zip(answers, ref)),
            "answers": len(answers),
            "median_first_difference": statistics.median(firsts),
        }
        print(name, out[name], flush=True)
    print(f"wrote {atomic_write_text(args.output, json.dumps(out, indent=1))}")


if __name__ == "__main__":
    main()
