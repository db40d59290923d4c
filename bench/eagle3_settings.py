"""EAGLE-3 training settings side by side on the same saved features: each arm is the recipe's `train-eagle3` command
plus its own flags, run for the first STEPS of the same schedule, two arms at a time with one thread each; their
held-out curves (first-draft accuracy and simulated τ at every evaluation) go to one JSON file.

    python bench/eagle3_settings.py --features runs/r4/feats --output-dir runs/r4 \\
        --arm x_base= --arm x_head=--init-head-from-target --arm x_lr25=--learning-rate=2.5e-3 \\
        --arm x_lr50=--learning-rate=5e-3 --output bench/results/eagle3_settings.json

An arm whose run directory already holds STEPS steps is only collected (`--collect` collects them all). Accuracy is
not a speed figure: the arms may share the cores.

With `--first-shards N` the arms train on the first N shards of the training features only (the same held-out
features): how much the amount of data moves a drafter at a fixed number of steps (lesson 22, "What limits tau").
The subset is a directory of links to those shards with its own index, made under --output-dir."""

import json, os, subprocess, sys
from pathlib import Path
import drafter_recipe
from mdlm_kit.core.checkpoint import atomic_write_text
from mdlm_kit.drafts.recipes import eval_curve
from bench_flags import bench_parser


def command(a, name: str, flags: str) -> list[str]:
    "The arm's mdlm-kit arguments: the recipe's EAGLE-3 command, then the arm's own flags (a later flag wins)."
    base = drafter_recipe.EAGLE3_ARGS.format(
        target=a.target,
        feats=a.features,
        eagle3_aux=a.eagle3_aux,
        eagle3_steps=a.max_steps,
        eagle3_eval=a.eval_interval,
    )
    extra = [f for f in flags.replace("=", " ").split() if f] if flags.startswith("--") else []
    return base.split() + ["--max-run-steps", str(a.steps)] + extra + ["--output-dir", str(Path(a.output_dir) / name)]


def curve(run: Path) -> list[dict]:
    return [
        {"step": e["step"], "acc_by_position": e["acc_by_position"], "tau": round(e["tau"], 3)} for e in eval_curve(run)
    ]


def first_shards(features: str, n: int, out: Path) -> Path:
    "A features directory (train/ and eval/) whose train/ holds the first `n` shards of `features`/train, as links."
    src, dst = Path(features).resolve(), out / f"feats_first{n}"
    index = json.loads((src / "train" / "index.json").read_text())
    if not 0 < n <= len(index["shards"]):
        raise SystemExit(f"--first-shards must be 1..{len(index['shards'])} for {features}")
    (dst / "train").mkdir(parents=True, exist_ok=True)
    index["shards"] = index["shards"][:n]
    index["n_samples"] = sum(s["n"] for s in index["shards"])
    index["data_key"] = f"{index.get('data_key', '')}:first{n}"  # other data: a resume must not take it for the whole
    for s in index["shards"]:
        link = dst / "train" / s["file"]
        if not link.is_symlink():
            link.symlink_to(src / "train" / s["file"])
    atomic_write_text(dst / "train" / "index.json", json.dumps(index, indent=1))
    if not (dst / "eval").is_symlink():
        (dst / "eval").symlink_to(src / "eval")
    return dst


def done(run: Path, steps: int) -> bool:
    "The arm has been evaluated at STEPS (or later)."
    return (run / "events.jsonl").is_file() and any(c["step"] >= steps for c in curve(run))


def main():
    ap = bench_parser(__doc__, "eagle3_settings.json")
    ap.add_argument("--features", required=True, help="a recipe run's feats directory (train/ and eval/)")
    ap.add_argument("--output-dir", required=True, help="the arms' run directories go here")
    ap.add_argument("--arm", action="append", default=[], help="NAME=FLAGS (flags joined by '=' or spaces)")
    ap.add_argument("--target-layers", type=int, default=0, help="the target's layer count (0: from its config)")
    ap.add_argument("--eagle3-layers", default="", help="EAGLE-3's three feature layers and the last (default: by it)")
    ap.add_argument("--steps", type=int, default=200, help="steps run of each arm")
    ap.add_argument("--max-steps", type=int, default=500, help="the schedule's length (500: r3's and the r4 sweep's)")
    ap.add_argument("--eval-interval", type=int, default=100)
    ap.add_argument("--first-shards", type=int, default=0, help="train on the first N shards of the features only")
    ap.add_argument("--collect", action="store_true", help="only collect finished arms")
    a = ap.parse_args()
    a.eagle3_aux = ",".join(map(str, drafter_recipe.feature_layers(a)[0][:-1]))  # the last layer is for the labels
    if a.first_shards:
        a.features = str(first_shards(a.features, a.first_shards, Path(a.output_dir)))
    arms = dict(s.split("=", 1) for s in a.arm)
    exe = str(Path(sys.executable).with_name("mdlm-kit"))
    todo = [] if a.collect else [n for n in arms if not done(Path(a.output_dir) / n, a.steps)]
    one = os.environ | {"OMP_NUM_THREADS": "1"}
    for i in range(0, len(todo), 2):  # two at a time, one core each
        procs = [subprocess.Popen([exe, *command(a, n, arms[n])], env=one) for n in todo[i : i + 2]]
        if any(p.wait() != 0 for p in procs):
            raise SystemExit("an arm failed; see its output above")
    out = {
        "command": "python " + " ".join(sys.argv),
        "arms": {
            n: {"flags": arms[n], "args": " ".join(command(a, n, arms[n])), "curve": curve(Path(a.output_dir) / n)}
            for n in arms
        },
    }
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(out, indent=1) + "\n")
    for n, r in out["arms"].items():
        last = r["curve"][-1] if r["curve"] else None
        if last:
            print(
                f"{n:10} {r['flags'] or '(recipe)':32} step {last['step']}: first draft "
                f"{last['acc_by_position'][0]:.3f}, simulated tau {last['tau']:.2f}"
            )
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
