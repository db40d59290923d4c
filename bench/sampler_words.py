"""Which sampler settings give a trained MDLM's most readable text: the share of sample words found in the training
text.

    python bench/sampler_words.py runs/quickstart/inference runs/quickstart/data

For each setting, 64 tokens after each of three prompts (none, 'The for statement', 'Return the') with three seeds;
a word is a run of 3+ letters, and it counts when the training split's text contains it (`known_word_fraction`).
Glued sub-word fragments, the mark of a model that has not learned its context, count as misses. Lesson 12 quotes the
result and the quickstart and playground defaults follow it.
"""

import argparse
import torch
from mdlm_kit.text.data import PackedData, known_word_fraction
from mdlm_kit.mdlm.sampling import decode, generate, load_inference

SETTINGS = [  # (sampler, steps, temperature, top-k)
    ("ancestral", 256, 1.0, 0),
    ("ancestral", 1024, 1.0, 0),
    ("ancestral", 256, 0.8, 0),
    ("ancestral", 256, 1.0, 20),
    ("confidence", 64, 1.0, 0),
    ("confidence", 64, 0.7, 0),
    ("blocks", 64, 1.0, 0),
    ("blocks", 64, 0.8, 0),
]
PROMPTS = ["", "The for statement", "Return the"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("data", help="the run's packed data directory (its training split is the word list)")
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args(argv)
    model, tok = load_inference(a.checkpoint, "cpu")
    words = PackedData(a.data).words("train")
    print(f"{'sampler':>10} {'steps':>5} {'T':>4} {'top-k':>5}  {'words known: mean':>18}  {'worst sample':>12}")
    for sampler, steps, temp, top_k in SETTINGS:
        shares = []
        for p in PROMPTS:
            ids = tok(p, add_special_tokens=False)["input_ids"] if p else []
            for seed in range(a.seeds):
                out = generate(
                    model,
                    ids,
                    64,
                    steps,
                    sampler,
                    block_length=16 if sampler == "blocks" else None,
                    temperature=temp,
                    top_k=top_k,
                    seed=seed,
                )
                shares.append(known_word_fraction(decode(tok, out[0])[len(p) :], words))
        print(
            f"{sampler:>10} {steps:>5} {temp:>4} {top_k:>5}  {sum(shares) / len(shares):>18.0%}  {min(shares):>12.0%}",
            flush=True,
        )


if __name__ == "__main__":
    torch.set_num_threads(2)
    main()
