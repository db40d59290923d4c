"""The CPU drafter recipe as one timed command: self-distilled answers, features for both drafters, then DFlash (with
the D-PACE loss) and EAGLE-3 trained side by side; the wall and CPU time of every stage, the data sizes, and the
drafters' held-out curves, written to one JSON file.

    python bench/drafter_recipe.py --output-dir runs/r8        # SmolLM2-135M-Instruct: 72 min, 1.8 CPU-hours
    python bench/drafter_recipe.py --output-dir runs/r6 --eagle3-steps 1000 --train-precision fp32   # r6: 1.9 CPU-hours
    python bench/drafter_recipe.py --output-dir runs/r7 --num-prompts 850 --self-prompts 850   # r7: 2.04 CPU-hours,
                                                                     # lower tau than r6 (lesson 27)
    python bench/drafter_recipe.py --collect runs/r3           # only rebuild the JSON from a finished run

Every stage is an `mdlm-kit` command in a child process (the same commands as `nbs/27_drafter_recipes.ipynb`). Its
wall time is measured around it; its CPU time is the children's user + system time (`resource.getrusage`), so it
counts both cores. The two trainers run at the same time with one thread each (`OMP_NUM_THREADS=1`): on two cores
that is faster than one after the other with two threads each. The stage times go to `RUN/recipe_times.json` as each
stage ends, so `--collect` can rebuild the summary later, and the same command started again goes on from the first
stage not finished (delete what a killed stage wrote first). Run it with nothing else on the cores. (The times above: a
2-core EPYC with AVX-512 BF16, where `inference_precision` generates the answers and features in bf16; on a CPU that
makes them in fp32, as the AVX2 machine of r3 did at 1.7-1.9x the time, `--num-prompts 1200` keeps it within two
CPU-hours. The trainers run in bf16 there too: r8's EAGLE-3 step took 1.42 s against r6's 2.32 s in fp32, which is
what pays for its 1,700 steps; where they train in fp32, `--eagle3-steps 1000` as r6 did.)"""

import json, os, resource, subprocess, sys, time
from pathlib import Path
from mdlm_kit.core.checkpoint import atomic_write_text, read_events
from mdlm_kit.core.device import machine_summary
from bench_flags import bench_parser

# one pass of the target for both drafters: the union of their layers; each trainer reads its own from it (and drops
# the conversations too short for it: DFlash needs 2 x block size supervised tokens)
FEATURES = (
    "hidden-states --target {target} --data {run}/chat/{split}.jsonl --layers {feature_layers} --block-size 1 "
    "--output {run}/feats/{split} --no-progress"
)
DFLASH = (
    "train-dflash --target-model-path {target} --train-hidden-states-path {run}/feats/train "
    "--eval-hidden-states-path {run}/feats/eval --output-dir {run}/dflash --block-size {block_size} --loss-type dpace "
    "--learning-rate 1e-3 --num-anchors 16 --batch-size 4 --max-steps {dflash_steps} --eval-interval {dflash_eval} "
    "--save-interval 50 --precision {train_precision} --no-progress"
)
# EAGLE-3's training but for where it writes (bench/eagle3_settings.py gives each of its arms a directory)
EAGLE3_ARGS = (
    "train-eagle3 --target-model-path {target} --train-hidden-states-path {feats}/train "
    "--eval-hidden-states-path {feats}/eval --batch-size 4 --ttt-length 4 "
    "--eagle-aux-hidden-state-layer-ids {eagle3_aux} --learning-rate 1e-3 --max-steps {eagle3_steps} "
    "--eval-interval {eagle3_eval} --save-interval 25 --no-progress"
)
EAGLE3 = EAGLE3_ARGS + " --precision {train_precision} --output-dir {run}/eagle3"
DATA = (
    "make-chat-data --target {target} --num-prompts {num_prompts} --self-prompts {self_prompts} "
    "--max-new-tokens {max_new_tokens} "
    "--batch-size {gen_batch_size} --temperature {temperature} --output {run}/chat/all.jsonl --no-progress"
)


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _kit(cmd: str, env=None, log=None) -> subprocess.Popen:
    "Start `mdlm-kit CMD` (the console script beside this Python)."
    exe = Path(sys.executable).with_name("mdlm-kit")
    return subprocess.Popen([str(exe), *cmd.split()], env=env, stdout=log, stderr=subprocess.STDOUT if log else None)


def _wait(*procs):
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"failed: mdlm-kit {' '.join(p.args[1:])}")


def _stage(name, run: Path, fn):
    "Run one stage, unless RUN/recipe_times.json has it already; book its wall and CPU time there."
    times = run / "recipe_times.json"
    book = json.loads(times.read_text()) if times.is_file() else {}
    if name in book:  # a run started again goes on from the first stage it had not finished
        print(f"{name}: done before ({book[name]['wall_s'] / 60:.1f} min wall), kept", flush=True)
        return
    t0, c0 = time.perf_counter(), _cpu_children()
    fn()
    wall, cpu = time.perf_counter() - t0, _cpu_children() - c0
    book[name] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}
    atomic_write_text(times, json.dumps(book, indent=1) + "\n")  # a killed run keeps the stages it finished
    print(f"{name}: {wall / 60:.1f} min wall, {cpu / 60:.1f} CPU-min", flush=True)


def _split(run: Path, n_eval: int):
    "The last n_eval answers are held out."
    rows = (run / "chat/all.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (run / "chat/train.jsonl").write_text("".join(rows[:-n_eval]), encoding="utf-8")
    (run / "chat/eval.jsonl").write_text("".join(rows[-n_eval:]), encoding="utf-8")


def _features(f):
    for split in ("train", "eval"):
        _wait(_kit(FEATURES.format(**f, split=split)))


def _train_both(f, run: Path):
    "DFlash and EAGLE-3 at once, one thread each."
    one = os.environ | {"OMP_NUM_THREADS": "1"}
    with open(run / "dflash.log", "w") as d, open(run / "eagle3.log", "w") as e:
        _wait(_kit(DFLASH.format(**f), one, d), _kit(EAGLE3.format(**f), one, e))


def target_layer_count(target: str) -> int:
    "The target's decoder layers, from its config alone (a GGUF's header, or config.json)."
    from transformers import AutoConfig
    from mdlm_kit.drafts.targets import resolve_target

    path, gguf = resolve_target(target)
    return AutoConfig.from_pretrained(path, **({"gguf_file": gguf} if gguf else {})).num_hidden_layers


def feature_layers(a) -> tuple[list[int], list[int]]:
    "EAGLE-3's layers (its three and the last) and the union both drafters read, from the flags or the target."
    from mdlm_kit.drafts.dflash import build_target_layer_ids
    from mdlm_kit.drafts.eagle3 import default_aux_layer_ids

    n = a.target_layers or target_layer_count(a.target)
    eagle3 = [int(i) for i in a.eagle3_layers.split(",")] if a.eagle3_layers else default_aux_layer_ids(n) + [n - 1]
    return eagle3, sorted(set(build_target_layer_ids(n, 5)) | set(eagle3))


def train_precision(flag: str) -> str:
    """The trainers' precision: `auto` is bf16 where they train on a CPU with native bf16 (r8's EAGLE-3: 1.42 s a step
    against r6's 2.32 in fp32), else the trainers' own auto (a GPU picks for itself)."""
    import torch
    from mdlm_kit.core.device import cpu_supports_bf16

    return "bf16" if flag == "auto" and not torch.cuda.is_available() and cpu_supports_bf16() else flag


def run_recipe(a, run: Path):
    "The stages, each timed."
    eagle3, union = feature_layers(a)
    f = vars(a) | {
        "train_precision": train_precision(a.train_precision),
        "run": run,
        "feats": run / "feats",
        "eagle3_aux": ",".join(map(str, eagle3[:-1])),  # the last layer is for the labels
        "feature_layers": ",".join(map(str, union)),
    }
    (run / "chat").mkdir(parents=True, exist_ok=True)
    _stage("data", run, lambda: (_wait(_kit(DATA.format(**f))), _split(run, a.eval_prompts)))
    _stage("features", run, lambda: _features(f))
    _stage("training", run, lambda: _train_both(f, run))


def _sizes(feats: Path) -> dict:
    "Conversations, tokens and supervised tokens in a features directory (ids and masks only)."
    from safetensors import safe_open

    idx = json.loads((feats / "index.json").read_text())
    n_tok = n_sup = 0
    for sh in idx["shards"]:
        with safe_open(str(feats / sh["file"]), "pt") as f:
            for k in f.keys():
                if k.endswith(".input_ids"):
                    n_tok += f.get_slice(k).get_shape()[-1]
                elif k.endswith(".loss_mask"):
                    n_sup += int(f.get_tensor(k).sum())
    return {"conversations": idx["n_samples"], "tokens": n_tok, "supervised_tokens": n_sup}


def collect(run: Path, command: str) -> dict:
    "The summary of a finished recipe run."
    out = {"command": command, "run": str(run), "machine": machine_summary()}
    times = run / "recipe_times.json"
    out["stages"] = json.loads(times.read_text()) if times.is_file() else {}
    feats = run / ("feats3" if (run / "feats3").is_dir() else "feats")  # runs before one pass fed both: feats3
    out["train_data"] = _sizes(feats / "train")
    out["eval_data"] = _sizes(feats / "eval")
    for name in ("dflash", "eagle3"):
        log = read_events(run / name / "events.jsonl")  # read once, split by kind
        ev = [e for e in log if e["event"] == "eval"]
        steps = [e for e in log if e["event"] == "train"]
        out[name] = {
            "steps": ev[-1]["step"] if ev else 0,
            "train_minutes": round((steps[-1]["time"] - steps[0]["time"]) / 60, 1) if len(steps) > 1 else None,
            "curve": [
                {
                    "step": e["step"],
                    "acc": round(e["acc"], 4),
                    "tau": round(e["tau"], 3),  # the mean over chain starts (lesson 18)
                    **({"tau_decode": round(e["tau_decode"], 3)} if "tau_decode" in e else {}),  # as decoding walks
                    "acc_by_position": e["acc_by_position"],
                }
                for e in ev
            ],
        }
    return out


def main():
    ap = bench_parser(__doc__, "drafter_recipe.json")
    ap.add_argument("--output-dir", default="runs/recipe")
    ap.add_argument("--collect", default="", help="only summarise this finished run")
    ap.add_argument(
        "--num-prompts", type=int, default=2200, help="embedded prompts to answer (r7: 850, with 850 self-written)"
    )
    ap.add_argument(
        "--self-prompts",
        type=int,
        default=0,
        help="also answer this many prompts the target writes itself (Magpie), in turn with the embedded ones; the "
        "last --eval-prompts answers of both are held out (r7: 850, which did not raise tau; lesson 27)",
    )
    ap.add_argument("--eval-prompts", type=int, default=40)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--gen-batch-size", type=int, default=96, help="answers per generate call")
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy answers, as decoding is measured")
    ap.add_argument("--block-size", type=int, default=8, help="DFlash block")
    ap.add_argument(
        "--eagle3-layers", default="", help="EAGLE-3's three feature layers and the last (default: by the target's)"
    )
    ap.add_argument("--target-layers", type=int, default=0, help="the target's layer count (0: from its config)")
    ap.add_argument("--dflash-steps", type=int, default=1000)
    ap.add_argument(
        "--eagle3-steps", type=int, default=1700, help="r8 (in bf16); r6 took 1,000 in fp32, r5 800 on 1,200 answers"
    )
    ap.add_argument(
        "--train-precision",
        default="auto",
        help="both trainers' --precision; auto: bf16 on a CPU with native bf16 (r8), else the trainers' auto (fp32 on "
        "a CPU; r6 and before trained in fp32)",
    )
    ap.add_argument("--dflash-eval", type=int, default=125)
    ap.add_argument("--eagle3-eval", type=int, default=100)
    a = ap.parse_args()
    run = Path(a.collect or a.output_dir)
    if not a.collect:
        run_recipe(a, run)
    summary = collect(run, "python " + " ".join(sys.argv))
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(summary, indent=1) + "\n")
    s = summary["stages"]
    if s:
        print(
            "stages:",
            ", ".join(f"{k} {v['wall_s'] / 60:.1f} min ({v['cpu_s'] / 60:.1f} CPU-min)" for k, v in s.items()),
        )
    print("train data:", summary["train_data"])
    for name in ("dflash", "eagle3"):
        c = summary[name]["curve"]
        if c:
            print(f"{name}: step {c[-1]['step']}, held-out acc {c[-1]['acc']:.3f}, simulated tau {c[-1]['tau']:.2f}")
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
