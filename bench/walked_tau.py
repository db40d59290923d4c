"""Two acceptance lengths of one EAGLE-3 drafter from its training pass (TTT): the mean over chain starts, which the
trainer has always reported as `tau`, and the walk greedy decoding takes (`walked_tau`, lesson 18; `tau_decode`).

    python bench/walked_tau.py --draft runs/r6/eagle3/draft --features runs/r6/feats/eval --prompts heldout

- on saved features (a recipe's held-out conversations, the target's answers as the feature pass stored them);
- with `--prompts`, on the target's own greedy answers to those prompts, decoded here in fp32 (`plain_decode`), whose
  features are computed afresh: the walk there must give what `bench/speculate.py` decodes with a chain of the same
  length on the same prompts (the chain starts cover answer tokens 2..n, as decoding's cycles do);
- with `--train-features`, on `--max-sequences` conversations spread evenly over the drafter's own training features:
  beside the two above it tells fitting (train = held out) from distribution (recipe's conversations > held-out
  prompts) as what limits a drafter's tau (lesson 22, "What limits tau").
Each set also reports the accuracy of each chain position and the share of the tokens the first draft must give that
the draft vocabulary holds at all (`in_draft_vocab`, a ceiling on every position); with `--train-chat` (the recipe's
chat data), the share of them that occur anywhere in its answers (`seen_in_training_answers`). No timing: the figures
are deterministic."""

import json, sys
from pathlib import Path
import torch
from mdlm_kit.drafts.chat_data import load_conversations
from mdlm_kit.drafts.eagle3 import eagle3_forward
from mdlm_kit.drafts.features import HiddenStates
from mdlm_kit.drafts.speculate import chat_ids, load_draft
from mdlm_kit.drafts.verification import plain_decode
from mdlm_kit.drafts.targets import TargetModel
from mdlm_kit.drafts.train import summarize
from bench_flags import add_prompt_flags, bench_parser, prompt_settings

SUMS = ("tau_sum", "n_blocks", "walk_tokens", "walk_cycles")


def _add(agg: dict, out: dict):
    "Sum a pass's metrics as the trainer's evaluation does."
    for k, v in out.items():
        if k not in ("numerator", "denominator"):
            agg[k] = agg.get(k, 0) + v.detach()


def answer_tokens(tokenizer, path: str) -> torch.Tensor:
    "The distinct token ids of every assistant turn in a chat file, tokenised alone."
    seen = set()
    for c in load_conversations(path):
        for m in c["messages"]:
            if m["role"] == "assistant":
                seen.update(tokenizer(m["content"], add_special_tokens=False)["input_ids"])
    return torch.tensor(sorted(seen))


def _vocab(agg: dict, draft, ids: torch.Tensor, lm: torch.Tensor, seen: torch.Tensor | None):
    """Count the tokens the first draft from each chain start in `lm` must give (a start at t reads token t + 1 and
    drafts t + 2) that the draft vocabulary holds, and that the training answers hold (`seen`)."""
    nxt = ids[0, 2:][lm[0, :-2].bool()]
    agg["drafted"] = agg.get("drafted", 0) + nxt.numel()
    agg["in_vocab"] = agg.get("in_vocab", 0) + int(torch.isin(nxt, draft.draft_ids()).sum())
    if seen is not None:
        agg["seen"] = agg.get("seen", 0) + int(torch.isin(nxt, seen).sum())


def _result(agg: dict, n: int) -> dict:
    ev = summarize(agg, "eagle3")  # the trainer's own reduction: tau and tau_decode
    return {
        "sequences": n,
        "tau_mean_over_starts": round(ev["tau"], 3),
        "tau_walked": round(ev["tau_decode"], 3),
        "acc_by_position": ev["acc_by_position"],
        "in_draft_vocab": round(agg["in_vocab"] / max(agg["drafted"], 1), 4),
        **({"seen_in_training_answers": round(agg["seen"] / max(agg["drafted"], 1), 4)} if "seen" in agg else {}),
        **{k: int(agg[k]) for k in SUMS},
    }


@torch.no_grad()
def on_features(draft, tables, path: str, steps: int, max_sequences: int = 0, seen=None) -> dict:
    """The training pass over saved features (their own loss masks and saved top-1); with `max_sequences`, that many
    conversations spread evenly over the set."""
    aux, H, rows = list(draft.config.eagle_aux_hidden_state_layer_ids), draft.config.hidden_size, draft.draft_ids()
    ds = HiddenStates(path)
    ds.check(layer_ids=aux + [ds.index["layer_ids"][-1]])  # the three fused layers and the last
    n = min(max_sequences, len(ds)) if max_sequences else len(ds)
    agg = {}
    for i in torch.linspace(0, len(ds) - 1, n).round().long().tolist():
        s = ds[i]
        hs = s["hidden_states"][None].float()
        logits = tables.logits(hs[..., 3 * H :], rows if "target_top1" in s else None)
        top1 = s["target_top1"][None] if "target_top1" in s else None
        ids, lm = s["input_ids"][None], s["loss_mask"][None]
        _add(agg, eagle3_forward(draft, tables, ids, lm, hs[..., : 3 * H], logits, steps, target_top1=top1))
        _vocab(agg, draft, ids, lm, seen)
    return _result(agg, n)


@torch.no_grad()
def on_greedy_answers(tgt, draft, tables, prompts, n: int, steps: int, seen=None) -> dict:
    "The training pass over the target's own greedy answers to `prompts` (n new tokens each), features in fp32."
    aux = list(draft.config.eagle_aux_hidden_state_layer_ids)
    agg = {}
    for m in prompts:
        p = chat_ids(tgt.tokenizer, m)
        ans = plain_decode(tgt, p, n, eos_token_id=tgt.tokenizer.eos_token_id).tokens
        ids = torch.tensor([p + ans])
        out = tgt(ids, layer_ids=aux, return_logits=True)
        lm = torch.zeros_like(ids)
        lm[0, len(p) - 1 : len(p) + len(ans) - 2] = 1  # the chain starts that draft answer tokens 2..n
        _add(agg, eagle3_forward(draft, tables, ids, lm, out.hidden_states.float(), out.logits.float(), steps))
        _vocab(agg, draft, ids, lm, seen)
    return _result(agg, len(prompts))


def main():
    ap = bench_parser(__doc__, "walked_tau.json")
    ap.add_argument("--draft", required=True, help="an EAGLE-3 draft directory")
    ap.add_argument("--features", default="", help="saved features (e.g. a recipe's feats/eval)")
    ap.add_argument(
        "--train-features", default="", help="the drafter's training features (e.g. a recipe's feats/train)"
    )
    ap.add_argument("--train-chat", default="", help="the recipe's chat data (chat/train.jsonl): tokens it holds")
    ap.add_argument("--max-sequences", type=int, default=200, help="conversations taken from --train-features")
    add_prompt_flags(ap, "", num_prompts=12, max_new_tokens=48)  # the target's answers to these prompts
    ap.add_argument("--steps", type=int, default=4, help="TTT steps: the chain length compared")
    args = ap.parse_args()
    run = prompt_settings(args)
    tgt = TargetModel.from_pretrained(args.target)
    tables, draft = tgt.embeddings_and_head(), load_draft(args.draft).eval()
    out = {"command": "python " + " ".join(sys.argv)}
    seen = answer_tokens(tgt.tokenizer, args.train_chat) if args.train_chat else None
    if seen is not None:
        out["distinct_training_answer_tokens"] = len(seen)
    if args.features:
        out["features"] = on_features(draft, tables, args.features, args.steps, seen=seen)
    if args.train_features:
        mx = args.max_sequences
        out["train_features"] = on_features(draft, tables, args.train_features, args.steps, mx, seen)
    if run.prompts:
        prompts, n = run.load(), run.max_new_tokens
        out["greedy_answers"] = on_greedy_answers(tgt, draft, tables, prompts, n, args.steps, seen)
    for k, v in out.items():
        print(k, v)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
