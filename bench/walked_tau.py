"""Two acceptance lengths of one EAGLE-3 drafter from its training pass (TTT): the mean over chain starts, which the
trainer has always reported as `tau`, and the walk greedy decoding takes (`walked_tau`, lesson 13; `tau_decode`).

    python bench/walked_tau.py --draft runs/r6/eagle3/draft --features runs/r6/feats/eval --prompts heldout

- on saved features (a recipe's held-out conversations, the target's answers as the feature pass stored them);
- with `--prompts`, on the target's own greedy answers to those prompts, decoded here in fp32 (`plain_decode`), whose
  features are computed afresh: the walk there must give what `bench/speculate.py` decodes with a chain of the same
  length on the same prompts (the chain starts cover answer tokens 2..n, as decoding's cycles do).
No timing: the figures are deterministic."""

import argparse, json, sys
from pathlib import Path
import torch
from mdlm_kit.drafts.eagle3 import eagle3_forward
from mdlm_kit.drafts.features import HiddenStates
from mdlm_kit.drafts.speculate import chat_ids, load_draft, load_prompts
from mdlm_kit.drafts.speculative import plain_decode
from mdlm_kit.drafts.targets import TargetModel
from mdlm_kit.drafts.train import summarize

SUMS = ("tau_sum", "n_blocks", "walk_tokens", "walk_cycles")


def _add(agg: dict, out: dict):
    "Sum a pass's metrics as the trainer's evaluation does."
    for k, v in out.items():
        if k not in ("numerator", "denominator"):
            agg[k] = agg.get(k, 0) + v.detach()


def _result(agg: dict, n: int) -> dict:
    ev = summarize(agg, "eagle3")  # the trainer's own reduction: tau and tau_decode
    return {
        "sequences": n,
        "tau_mean_over_starts": round(ev["tau"], 3),
        "tau_walked": round(ev["tau_decode"], 3),
        **{k: int(agg[k]) for k in SUMS},
    }


@torch.no_grad()
def on_features(draft, tables, path: str, steps: int) -> dict:
    "The training pass over saved features (their own loss masks and saved top-1)."
    aux, H, rows = list(draft.config.eagle_aux_hidden_state_layer_ids), draft.config.hidden_size, draft.draft_ids()
    ds = HiddenStates(path)
    ds.check(layer_ids=aux + [ds.index["layer_ids"][-1]])  # the three fused layers and the last
    agg = {}
    for i in range(len(ds)):
        s = ds[i]
        hs = s["hidden_states"][None].float()
        logits = tables.logits(hs[..., 3 * H :], rows if "target_top1" in s else None)
        top1 = s["target_top1"][None] if "target_top1" in s else None
        ids, lm = s["input_ids"][None], s["loss_mask"][None]
        _add(agg, eagle3_forward(draft, tables, ids, lm, hs[..., : 3 * H], logits, steps, target_top1=top1))
    return _result(agg, len(ds))


@torch.no_grad()
def on_greedy_answers(tgt, draft, tables, prompts, n: int, steps: int) -> dict:
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
    return _result(agg, len(prompts))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="smollm2")
    ap.add_argument("--draft", required=True, help="an EAGLE-3 draft directory")
    ap.add_argument("--features", default="", help="saved features (e.g. a recipe's feats/eval)")
    ap.add_argument("--prompts", default="", help="'heldout', 'embedded' or a prompt file: the target's answers")
    ap.add_argument("--num-prompts", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--steps", type=int, default=4, help="TTT steps: the chain length compared")
    ap.add_argument("--output", default="bench/results/walked_tau.json")
    args = ap.parse_args()
    tgt = TargetModel.from_pretrained(args.target)
    tables, draft = tgt.embeddings_and_head(), load_draft(args.draft).eval()
    out = {"command": "python " + " ".join(sys.argv)}
    if args.features:
        out["features"] = on_features(draft, tables, args.features, args.steps)
    if args.prompts:
        prompts = load_prompts(args.prompts, args.num_prompts or None)
        out["greedy_answers"] = on_greedy_answers(tgt, draft, tables, prompts, args.max_new_tokens, args.steps)
    for k, v in out.items():
        print(k, v)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
