"""How much of the target's own greedy answers repeats what came before, early and late in an answer: the share of
answer tokens whose bigram (the token before it and itself) already occurred earlier in the prompt or the answer.
Prompt lookup can only draft such tokens; a drafter that predicts from meaning need not see them.

    python bench/answer_repeats.py --prompts heldout --num-prompts 12 --max-new-tokens 128 --split 48

The answers are decoded here in fp32 (`plain_decode`), as `bench/speculate.py`'s baseline decodes them; greedy
decoding makes their first `--split` tokens those of a shorter run. No timing: the figures are deterministic."""

import json, sys
from pathlib import Path
from mdlm_kit.drafts.speculate import chat_ids, load_prompts
from mdlm_kit.drafts.verification import plain_decode
from mdlm_kit.drafts.targets import TargetModel
from bench_flags import add_prompt_flags, bench_parser, prompt_settings


def bigram_seen(prompt: list[int], answer: list[int]) -> list[bool]:
    "For each answer token: did the pair (token before it, it) occur earlier, in the prompt or the answer so far?"
    prev, seen, out = (prompt[-1] if prompt else None), set(zip(prompt, prompt[1:])), []
    for t in answer:
        out.append((prev, t) in seen)
        if prev is not None:
            seen.add((prev, t))
        prev = t
    return out


def shares(flags: list[list[bool]], split: int) -> dict:
    "The share of repeated tokens before answer position `split` and from it on, over all answers."
    early = [f for fs in flags for f in fs[:split]]
    late = [f for fs in flags for f in fs[split:]]
    return {
        "early_tokens": len(early),
        "late_tokens": len(late),
        "early_repeat_share": round(sum(early) / len(early), 3) if early else None,
        "late_repeat_share": round(sum(late) / len(late), 3) if late else None,
    }


def main():
    ap = bench_parser(__doc__, "answer_repeats.json")
    add_prompt_flags(ap, "heldout", num_prompts=12, max_new_tokens=128)
    ap.add_argument("--split", type=int, default=48, help="answer position where 'late' begins")
    args = ap.parse_args()
    run = prompt_settings(args)  # --prompts: a comma list of prompt sets
    tgt = TargetModel.from_pretrained(args.target)
    eos = tgt.tokenizer.eos_token_id
    out = {"command": "python " + " ".join(sys.argv), "split": args.split, "max_new_tokens": run.max_new_tokens}
    for name in run.prompts.split(","):
        flags = []
        for msgs in load_prompts(name, run.num_prompts):
            ids = chat_ids(tgt.tokenizer, msgs)
            flags.append(bigram_seen(ids, plain_decode(tgt, ids, run.max_new_tokens, eos_token_id=eos).tokens))
        out[name] = shares(flags, args.split)
        print(name, out[name], flush=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
