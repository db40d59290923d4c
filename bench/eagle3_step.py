"""What the target's saved top-1 saves in an EAGLE-3 training step: the recipe's step (loss, backward) on the same
batches of saved features, with the target's whole LM head applied to its last hidden state (what the trainer did
before the features held `target_top1`) against only the draft vocabulary's columns of that head plus the saved
top-1. One process, one thread by default (the recipe trains each drafter on one core), a warm-up, interleaved
rounds, medians. It also counts the positions where the saved top-1 (the target's own, in the precision the feature
pass ran it in) differs from the argmax of the logits recomputed in fp32 from the stored features: the labels the two
ways differ there.

    python bench/eagle3_step.py --features runs/r5/feats [--batches 4 --rounds 5 --threads 1]"""

import json, statistics, tempfile, time
from pathlib import Path
import torch
from mdlm_kit.cli.drafts import config_from_args
from mdlm_kit.cli.main import make_parser
from mdlm_kit.core.device import machine_summary
from mdlm_kit.drafts.train import DraftTrainer
import drafter_recipe  # the recipe's EAGLE-3 flags (bench/ is on the path when run as a script)
from bench_flags import bench_parser


def trainer(features: str, target: str, out: str, aux: str = "1,14,26") -> DraftTrainer:
    "The recipe's EAGLE-3 trainer (its own `train-eagle3` flags) on these features, in fp32 on the CPU, not trained."
    flags = drafter_recipe.EAGLE3_ARGS.format(
        target=target, feats=features, eagle3_aux=aux, eagle3_steps=800, eagle3_eval=100
    ).split()
    args = make_parser().parse_args(flags + ["--output-dir", out, "--device", "cpu", "--precision", "fp32"])
    cfg = config_from_args(args, "eagle3")
    cfg.data.eval_hidden_states_path = ""  # steps are timed on training batches alone
    return DraftTrainer(cfg, out, "eagle3", progress=False, log=lambda *a: None)


def one_step(tr: DraftTrainer, batch, saved_top1: bool):
    "Loss and backward of one batch; the seconds it took and the loss."
    ids, lm, hid, top1, draws = batch
    t0 = time.perf_counter()
    out = tr.objective.loss(tr.tables, ids, lm, hid, draws, top1 if saved_top1 else None)
    loss = out["numerator"] / out["denominator"]
    loss.backward()
    dt = time.perf_counter() - t0
    tr.model.zero_grad(set_to_none=True)
    return dt, loss.item()


def label_disagreement(tr: DraftTrainer, batches) -> tuple[int, int]:
    "Supervised positions whose saved top-1 differs from the argmax recomputed from the stored features, and all."
    H, differ, total = tr.model.config.hidden_size, 0, 0
    with torch.no_grad():
        for ids, lm, hid, top1, _ in batches:
            again = tr.tables.logits(hid[..., 3 * H :]).argmax(-1)
            m = lm.bool()
            differ += int((again[m] != top1[m]).sum())
            total += int(m.sum())
    return differ, total


def main():
    ap = bench_parser(__doc__, "eagle3_step.json", target=False)
    ap.add_argument("--features", required=True, help="a recipe run's feats directory (saved with target_top1)")
    ap.add_argument("--target", default="smollm2")
    ap.add_argument("--batches", type=int, default=4, help="batches timed each round (the trainer's first ones)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", default="1,14,26", help="EAGLE-3's three feature layers (the recipe's, for SmolLM2)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as out:
        tr = trainer(a.features, a.target, out, a.layers)
        batches = [tr.batch(tr.train_set, tr.micro_batch(m)[0]) for m in range(a.batches)]
        if batches[0][3] is None:
            raise SystemExit(f"{a.features} has no target_top1: make its features again with `mdlm-kit hidden-states`")
        tr.model.train()
        ways = {"whole head": False, "saved top-1": True}
        one_step(tr, batches[0], False)  # warm-up, both ways
        one_step(tr, batches[0], True)
        times = {w: [] for w in ways}
        losses = {w: [] for w in ways}
        for r in range(a.rounds):
            order = list(ways) if r % 2 == 0 else list(ways)[::-1]  # interleaved, alternating which goes first
            for w in order:
                dts, ls = zip(*(one_step(tr, b, ways[w]) for b in batches))
                times[w].append(sum(dts) / len(dts))
                losses[w] = list(ls)
        differ, total = label_disagreement(tr, batches)
    med = {w: statistics.median(t) for w, t in times.items()}
    res = {
        "command": "python bench/" + Path(__file__).name + f" --features {a.features} --batches {a.batches} "
        f"--rounds {a.rounds} --threads {a.threads}",
        "machine": machine_summary(),
        "threads": a.threads,
        "tokens_per_batch": [int(b[0].numel()) for b in batches],
        "seconds_per_step": {w: round(v, 3) for w, v in med.items()},
        "ratio": round(med["saved top-1"] / med["whole head"], 3),
        "loss": {w: [round(x, 5) for x in v] for w, v in losses.items()},
        "labels_differ": f"{differ}/{total}",
    }
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(res, indent=1) + "\n")
    for w, v in med.items():
        print(f"{w:12} {v:.3f} s a step")
    print(f"saved top-1 / whole head: {res['ratio']:.2f}; labels differ at {res['labels_differ']} supervised positions")
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
