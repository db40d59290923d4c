"""How fast each objective learns on this CPU: validation curves and time-to-quality, side by side in one process.

    python bench/mdlm_learning.py   # the quickstart's MDLM, the same model as AR, and the old default
    python bench/mdlm_learning.py --runs mdlm,ar --corpus my.txt --target-bpc 2.2
    python bench/mdlm_learning.py --from-quickstart runs/quickstart --target-bpc 2.5   # a `quickstart --baseline` run

Every run is a real `Trainer` (the quickstart's config plus its overrides) on one packed data set. Their optimizer
steps are interleaved (one step of each in turn), so machine noise hits all of them alike, and only the time spent
inside `train_step` counts as training time. Every `--eval-every` steps each run is scored on the same validation
blocks (MDLM: the ELBO bound at `--levels` noise levels; AR: the exact NLL) and converted to bits per character
with the split's own characters-per-token ratio. Runs with other data settings (`vocab_512`) get their own packed
data; bits per character is the unit that compares across tokenizers. Time-to-quality is the training time at which
a run first scores `--target-bpc` or better.

`--from-quickstart RUN` reads the curves of a finished `mdlm-kit quickstart --baseline` instead of training: there the
two models trained at the same time on one core each, so their wall clocks compare directly (evaluations included,
the same for both); their validation events give nats/token, converted with the validation split's characters. The
result (curves, unigram entropy, time-to-quality) goes to `--out` as JSON; lesson 11 draws its figure from it.
"""

import argparse, hashlib, json, math, tempfile, time
from pathlib import Path
import torch
from mdlm_kit.core.checkpoint import read_events
from mdlm_kit.core.config import apply_overrides, load_config, to_dict
from mdlm_kit.core.device import machine_summary
from mdlm_kit.text.data import PackedData, prepare_data
from mdlm_kit.mdlm.diffusion import ar_nll, elbo_bound
from mdlm_kit.mdlm.train import Trainer

RUNS = {  # name: overrides of the built-in quickstart config
    "mdlm": [],
    "ar": ['training.objective="ar"'],
    # the default before lesson 11's fixes: no output bias, no local mixing, coin-flip masking, 300 steps of 32
    "mdlm_before": [
        "model.head_bias=false",
        "model.local_mixing=0",
        'training.masking="bernoulli"',
        "training.batch_size=32",
        "training.max_steps=300",
        "training.min_lr=0.0003",
        "training.warmup_steps=30",
    ],
    # one change each, against the default (the ablations of lesson 11)
    "no_head_bias": ["model.head_bias=false"],
    "no_local_mixing": ["model.local_mixing=0"],
    "ar_no_local_mixing": ['training.objective="ar"', "model.local_mixing=0"],
    "bernoulli_masking": ['training.masking="bernoulli"'],
    "vocab_512": ["data.tokenizer_vocab_size=512"],
    "ar_vocab_512": ['training.objective="ar"', "data.tokenizer_vocab_size=512"],
}


def score(tr: Trainer, blocks: list, levels: int) -> float:
    "Nats/token of `tr`'s model on `blocks`: the exact NLL (AR) or the ELBO bound (MDLM)."
    if tr.cfg.training.objective == "ar":
        return ar_nll(tr.model, blocks, tr.data.meta["eos_token_id"])["nats_per_token"]
    return elbo_bound(tr.model, blocks, tr.cfg.model.mask_token_id, n_levels=levels)["nats_per_token"]


def from_quickstart(run: Path, target: float | None) -> dict:
    "Curves and time-to-quality of a finished `quickstart --baseline` run (RUN and RUN/ar, trained side by side)."
    data = PackedData(run / "data")
    tok_per_char = data.meta["n_val_blocks"] * data.block_size / data.n_chars("val")
    curves = {}
    for name, d in (("mdlm", run), ("ar", run / "ar")):
        evs = read_events(d / "events.jsonl")
        t0 = next(e["time"] for e in evs if e["event"] in ("start", "resume"))
        curves[name] = [
            {
                "step": e["step"],
                "train_s": round(e["time"] - t0, 1),
                "nats_per_token": e["nats_per_token"],
                "bits_per_char": e["nats_per_token"] * tok_per_char / math.log(2),
            }
            for e in evs
            if e["event"] == "validation"
        ]
    return {
        "unigram_nats_per_token": data.unigram_entropy("val"),
        "tokens_per_char": tok_per_char,
        "curves": curves,
        "source": str(run),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default="mdlm,ar,mdlm_before", help=f"comma-separated, from {', '.join(RUNS)}")
    ap.add_argument("--corpus", default="embedded", help="'embedded' or a UTF-8 text file")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override for every run")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-blocks", type=int, default=64, help="validation blocks scored at each evaluation")
    ap.add_argument("--levels", type=int, default=8, help="noise levels of the MDLM bound")
    ap.add_argument(
        "--target-bpc",
        type=float,
        default=None,
        help="bits/char for time-to-quality (default: the best the slowest run reached)",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="bench/results/mdlm_learning.json")
    ap.add_argument("--from-quickstart", help="a finished `mdlm-kit quickstart --baseline` run directory")
    a = ap.parse_args(argv)
    if a.from_quickstart:
        res = from_quickstart(Path(a.from_quickstart), a.target_bpc)
        return finish(res, a)
    torch.set_num_threads(a.threads)
    work = Path(tempfile.mkdtemp(prefix="mdlm_learning-"))
    names = a.runs.split(",")
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        ap.error(f"unknown runs {unknown}; choose from {', '.join(RUNS)}")
    trainers, blocks, tok_per_char, unigram = {}, {}, {}, {}
    for n in names:  # runs that share data settings share the packed data (and tokenizer)
        cfg = apply_overrides(load_config(None), [f"data.corpus={json.dumps(a.corpus)}"] + a.overrides + RUNS[n])
        key = hashlib.sha256(json.dumps(to_dict(cfg.data), sort_keys=True).encode()).hexdigest()[:8]
        cfg = apply_overrides(cfg, [f'data.data_dir="{work / ("data-" + key)}"'])
        prepare_data(cfg.data, cfg.data.data_dir, log=lambda *x: None)
        data = PackedData(cfg.data.data_dir)
        blocks[n] = data.batches("val", 16, a.eval_blocks)
        tok_per_char[n] = data.meta["n_val_blocks"] * data.block_size / data.n_chars("val")
        unigram[n] = data.unigram_entropy("val")
        trainers[n] = Trainer(cfg, work / n, progress=False, log=lambda *x: None)
        trainers[n].out.mkdir(parents=True, exist_ok=True)
    curves = {n: [] for n in names}
    clock = {n: 0.0 for n in names}
    bpc = lambda n, nats: nats * tok_per_char[n] / math.log(2)
    for n, tr in trainers.items():
        s = score(tr, blocks[n], a.levels)
        curves[n].append({"step": 0, "train_s": 0.0, "nats_per_token": s, "bits_per_char": bpc(n, s)})
    while any(tr.step < tr.cfg.training.max_steps for tr in trainers.values()):
        for n, tr in trainers.items():
            if tr.step >= tr.cfg.training.max_steps:
                continue
            t0 = time.perf_counter()
            tr.train_step()
            tr.settle()  # the loop's check of a non-finite step, as `run` makes it at each log
            clock[n] += time.perf_counter() - t0
            if tr.step % a.eval_every == 0 or tr.step == tr.cfg.training.max_steps:
                s = score(tr, blocks[n], a.levels)
                curves[n].append(
                    {"step": tr.step, "train_s": round(clock[n], 2), "nats_per_token": s, "bits_per_char": bpc(n, s)}
                )
                print(
                    f"{n:>18} step {tr.step:>5}  {clock[n]:7.1f} s  {s:.3f} nats/token  {bpc(n, s):.3f} bits/char",
                    flush=True,
                )
    res = {
        "corpus": a.corpus,
        "threads": a.threads,
        "eval_blocks": a.eval_blocks,
        "levels": a.levels,
        "unigram_nats_per_token": unigram,
        "tokens_per_char": tok_per_char,
        "runs": {n: RUNS[n] + a.overrides for n in names},
        "curves": curves,
    }
    return finish(res, a)


def finish(res: dict, a) -> dict:
    "Add time-to-quality, write the JSON, print the summary."
    curves = res["curves"]
    target = a.target_bpc or max(min(p["bits_per_char"] for p in c) for c in curves.values())
    ttq = {n: next((p["train_s"] for p in c if p["bits_per_char"] <= target), None) for n, c in curves.items()}
    res.update(target_bits_per_char=target, time_to_target_s=ttq, machine=machine_summary())
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(
        f"time to {target:.3f} bits/char: "
        + ", ".join(f"{n} {'-' if t is None else f'{t / 60:.1f} min'}" for n, t in ttq.items())
    )
    return res


if __name__ == "__main__":
    main()
