"""Fault injection: SIGKILL the kit's long-running commands at random moments and check that nothing is lost.

    python tools/fault_inject.py   # 20 kills of a running process per job, 6 jobs (about 20 minutes on 2 cores)
    python tools/fault_inject.py --kills 3 --jobs mdlm,dflash

Jobs: `mdlm` (train), `ddp` (train as two processes under torchrun, gloo on the CPU), `dflash` (train-dflash),
`eagle3` (train-eagle3), `chat` (make-chat-data), `features` (hidden-states), each on a tiny model so a run takes
seconds. A kill takes the whole process tree (torchrun starts its workers in sessions of their own). Checkpoints are
saved every step, so many kills land inside a checkpoint write. A kill that comes after the process has already
finished does not count: it keeps trying (up to 4x the asked number) until the asked number of kills hit a running
process. After every kill it checks that

- every checkpoint on disk loads (with `weights_only=True`) and `latest` names a loadable one;
- `events.jsonl` parses line by line (a torn last line is allowed: the kill can cut a write);
- the exported model directory (`inference/`, `draft/`) loads whole whenever it exists, and exists after the first save;
- `make-chat-data` output has no duplicate record and at most a torn last line (repaired when the job restarts);
  `hidden-states` has an index whose shards all load;

then restarts the same command (trainers with `--resume` once they have logged anything, even before their first
checkpoint), and after the last kill finishes the job and compares it with
an uninterrupted run: final weights bit-equal for the trainers, the same records for chat data, the same tensors for
features. Exit code 1 and a report when anything differs."""

import argparse, json, os, random, shutil, signal, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAINERS = ("mdlm", "ddp", "dflash", "eagle3")
MODEL_DIR = {"mdlm": "inference", "ddp": "inference", "dflash": "draft", "eagle3": "draft"}  # what each one exports
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
EXE = str(Path(sys.executable).parent / "mdlm-kit")
CHAT_PROMPTS = 36  # the chat job answers this many prompts, 18 batches of 2
ENV = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "GRADIO_ANALYTICS_ENABLED": "False", "OMP_NUM_THREADS": "1"}
ENV["PYTHONFAULTHANDLER"] = "1"  # a process that aborts (SIGABRT) prints every thread's Python stack first


def tiny_toml(corpus: Path, steps: int) -> str:
    "configs/tiny.toml on `corpus` for `steps` steps, a checkpoint every step (three kept) and no eval."
    from mdlm_kit.core.config import apply_overrides, load_config, to_toml

    overrides = [f"data.corpus={json.dumps(str(corpus))}", 'name="fault"', f"training.max_steps={steps}"]
    overrides += ["training.gradient_accumulation_steps=1", "training.min_lr=-1.0", "training.eval_interval=1000"]
    overrides += ["training.save_interval=1", "training.keep_last=3"]
    return to_toml(apply_overrides(load_config(ROOT / "configs" / "tiny.toml"), overrides))


def setup(work: Path) -> dict:
    "A corpus, a tiny target saved to disk, and a small chat file."
    from mdlm_kit.drafts.chat_data import topics_chat
    from mdlm_kit.drafts.targets import tiny_target
    from mdlm_kit.text.data import reference_topics

    corpus = work / "corpus.txt"
    corpus.write_text("\n\n".join(list(reference_topics().values())[:20]), encoding="utf-8")
    tgt = tiny_target("qwen3", num_layers=5)
    tgt.model.save_pretrained(work / "target")
    tgt.tokenizer.save_pretrained(work / "target")
    chat = topics_chat(work / "chat.jsonl", 48, answer_chars=300)
    (work / "tiny.toml").write_text(tiny_toml(corpus, steps=40))
    return {"corpus": corpus, "target": work / "target", "chat": chat, "toml": work / "tiny.toml"}


def commands(job: str, paths: dict, out: Path) -> tuple[list, list]:
    "(first command, restart command) for a job writing to `out`."
    t, chat = str(paths["target"]), str(paths["chat"])
    drafter = [
        "--target-model-path",
        t,
        "--train-data-path",
        chat,
        "--output-dir",
        str(out),
        "--batch-size",
        "2",
        "--num-epochs",
        "2",
        "--save-interval",
        "1",
        "--keep-last",
        "3",
        "--eval-interval",
        "1000",
        "--log-interval",
        "1",
        "--device",
        "cpu",
        "--precision",
        "fp32",
        "--no-progress",
        "--learning-rate",
        "3e-3",
    ]
    if job in ("mdlm", "ddp"):
        cmd = [EXE, "train", "--config", str(paths["toml"]), "--output-dir", str(out), "--no-progress"]
        cmd = TORCHRUN + cmd + ["--set", "training.batch_size=2"] if job == "ddp" else cmd  # 2 a process: 4 a step
        return cmd, cmd + ["--resume"]
    if job == "dflash":
        cmd = [EXE, "train-dflash", *drafter, "--block-size", "4", "--num-feature-layers", "2", "--num-anchors", "6"]
        return cmd, cmd + ["--resume"]
    if job == "eagle3":
        cmd = [EXE, "train-eagle3", *drafter, "--ttt-length", "3", "--draft-vocab-size", "64"]
        return cmd, cmd + ["--resume"]
    if job == "chat":
        cmd = [
            EXE,
            "make-chat-data",
            "--target",
            t,
            "--num-prompts",
            str(CHAT_PROMPTS),
            "--output",
            str(out / "chat.jsonl"),
            "--batch-size",
            "2",
            "--max-new-tokens",
            "12",
            "--device",
            "cpu",
            "--no-progress",
        ]
        return cmd, cmd
    if job == "features":
        cmd = [
            EXE,
            "hidden-states",
            "--target",
            t,
            "--data",
            chat,
            "--output",
            str(out),
            "--layers",
            "1,3",
            "--dtype",
            "fp32",
            "--batch-size",
            "1",
            "--shard-size",
            "4",
            "--device",
            "cpu",
            "--no-progress",
        ]
        return cmd, cmd
    raise ValueError(job)


def progress_marker(job: str, out: Path) -> Path:
    "The file whose appearance shows a job has started writing results."
    return {"chat": out / "chat.jsonl", "features": out / "index.json"}.get(job, out / "checkpoints" / "latest")


def started(job: str, out: Path) -> bool:
    """Whether a restart must continue the run: a trainer once it has logged (`resume_point`'s rule, before its first
    checkpoint too)."""
    return (out / "events.jsonl").exists() if job in TRAINERS else progress_marker(job, out).exists()


def finished(job: str, out: Path) -> bool:
    if job in TRAINERS:
        ev = out / "events.jsonl"
        return ev.is_file() and '"event": "complete"' in ev.read_text()
    if job == "features":
        ip = out / "index.json"
        return ip.is_file() and json.loads(ip.read_text()).get("complete", False)
    f = out / "chat.jsonl"
    return f.is_file() and len(f.read_text().splitlines()) >= CHAT_PROMPTS


def done_fraction(job: str, out: Path, ref: Path) -> float:
    "How much of the job `out` holds already, against the finished reference run `ref` (0 to 1)."
    try:
        if job in TRAINERS:
            step = lambda d: int((d / "checkpoints" / "latest").read_text().strip().split("_")[1].split(".")[0])
            return step(out) / step(ref) if (out / "checkpoints" / "latest").exists() else 0.0
        if job == "chat":
            n = lambda d: len((d / "chat.jsonl").read_text().splitlines())
            return n(out) / n(ref) if (out / "chat.jsonl").exists() else 0.0
        shards = lambda d: len(json.loads((d / "index.json").read_text())["shards"])
        return shards(out) / shards(ref) if (out / "index.json").exists() else 0.0
    except (OSError, ValueError, IndexError):
        return 0.0


def timed_run(cmd, marker: Path) -> tuple[float, float]:
    "Run to completion; return (seconds until `marker` appeared, total seconds)."
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    first = None
    while p.poll() is None:
        if first is None and marker.exists():
            first = time.perf_counter() - t0
        time.sleep(0.02)
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd[1:3])} failed ({p.returncode}):\n{p.stderr.read()[-6000:]}")
    total = time.perf_counter() - t0
    return (first if first is not None else total / 2), total


def run(cmd, timeout=600):
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd[1:3])} failed ({r.returncode}):\n{r.stderr[-6000:]}")
    return r


def descendants(pid: int) -> list[int]:
    "Every process below `pid`, read from Linux's /proc: torchrun's workers run in sessions of their own."
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a process that ended while we read
        children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        out += below
        todo += below
    return out


def kill_at(cmd, delay: float) -> bool:
    """Start `cmd`, SIGKILL it and every process below it after `delay` s; True if it was still running (a real
    kill)."""
    p = subprocess.Popen(
        cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True
    )
    try:
        p.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        tree = descendants(p.pid)
        os.killpg(p.pid, signal.SIGKILL)
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()
        return True


def check_state(job: str, out: Path) -> str:
    "Integrity after a kill; returns a short description of what survived (raises on damage)."
    from mdlm_kit.core.checkpoint import safe_torch_load

    if job in TRAINERS:
        ck = out / "checkpoints"
        steps = []
        for f in sorted(ck.glob("step_*.pt")) if ck.is_dir() else []:
            safe_torch_load(f)  # raises on a torn or foreign file
            steps.append(int(f.stem.split("_")[1]))
        latest = ck / "latest"
        if latest.exists():
            name = latest.read_text().strip()
            assert (ck / name).is_file(), f"latest names {name}, which is missing"
        ev = out / "events.jsonl"
        if ev.is_file():
            lines = ev.read_text().splitlines()
            for l in lines[:-1]:
                json.loads(l)  # only the very last line may be torn
        model_dir = out / MODEL_DIR[job]
        if model_dir.exists() or model_dir.is_symlink():  # replaced atomically: always whole
            from mdlm_kit.core.checkpoint import load_model_dir

            load_model_dir(model_dir)
        else:  # only the first save can be cut before it
            assert len(steps) <= 1, f"{model_dir.name}/ is missing although {len(steps)} checkpoints were saved"
        return f"checkpoints {steps[-3:] if steps else 'none'}, {model_dir.name}/ " + (
            "whole" if model_dir.exists() else "not yet"
        )
    if job == "chat":
        f = out / "chat.jsonl"
        if not f.is_file():
            return "no output yet"
        lines = f.read_text().splitlines()
        recs = [json.loads(l) for l in lines[:-1] if l.strip()]  # a torn record may only be the last line
        try:
            recs.append(json.loads(lines[-1]))
        except (json.JSONDecodeError, IndexError):
            pass  # the next run repairs it
        ids = [r.get("id") for r in recs]
        assert len(ids) == len(set(ids)), "duplicate records"
        return f"{len(recs)} records"
    if job == "features":
        ip = out / "index.json"
        if not ip.is_file():
            return "no index yet"
        index = json.loads(ip.read_text())
        from safetensors import safe_open

        for s in index["shards"]:
            with safe_open(str(out / s["file"]), "pt") as fh:
                list(fh.keys())
        return f"{len(index['shards'])} shards, complete={index['complete']}"
    raise ValueError(job)


def compare(job: str, a: Path, b: Path):
    "The interrupted-and-resumed result equals the uninterrupted one."
    import torch

    if job in TRAINERS:
        from mdlm_kit.core.checkpoint import safe_torch_load

        la = (a / "checkpoints" / "latest").read_text().strip()
        lb = (b / "checkpoints" / "latest").read_text().strip()
        assert la == lb, f"final checkpoints differ: {la} vs {lb}"
        wa, wb = safe_torch_load(a / "checkpoints" / la)["model"], safe_torch_load(b / "checkpoints" / lb)["model"]
        diff = [k for k in wa if not torch.equal(wa[k], wb[k])]
        assert not diff, f"final weights differ in {diff[:3]}"
        from mdlm_kit.core.checkpoint import load_model_dir

        ea, eb = load_model_dir(a / MODEL_DIR[job])[0], load_model_dir(b / MODEL_DIR[job])[0]
        assert all(torch.equal(ea[k], eb[k]) for k in ea), f"the exported {MODEL_DIR[job]}/ differs"
    elif job == "chat":
        ra = {r["id"]: r for r in map(json.loads, (a / "chat.jsonl").read_text().splitlines())}
        rb = {r["id"]: r for r in map(json.loads, (b / "chat.jsonl").read_text().splitlines())}
        assert ra == rb, f"records differ ({len(ra)} vs {len(rb)})"
    else:
        from mdlm_kit.drafts.features import HiddenStates

        ha, hb = HiddenStates(a), HiddenStates(b)
        assert len(ha) == len(hb)
        for i in range(len(ha)):
            assert torch.equal(ha[i]["hidden_states"], hb[i]["hidden_states"]), f"sample {i} differs"


def inject(job: str, kills: int, paths: dict, work: Path, rng: random.Random) -> dict:
    ref, out = work / f"{job}-ref", work / f"{job}-killed"
    first, again = commands(job, paths, ref)
    t_first, t_full = timed_run(first, progress_marker(job, ref))
    t_ref = t_full
    first, again = commands(job, paths, out)
    real, restarts, attempts, log = 0, 0, 0, []
    while real < kills and attempts < 4 * kills:  # count only kills that hit a running process
        attempts += 1
        if finished(job, out):  # nothing left to interrupt: start this job over
            shutil.rmtree(out, ignore_errors=True)
            restarts += 1
        begun = started(job, out)
        left = 1.0 - min(1.0, done_fraction(job, out, ref))
        # from just before the first write to the end of what is left of the run (start-up costs the same every time)
        delay = rng.uniform(0.8 * t_first, t_first + (t_full - t_first) * left)
        hit = kill_at(again if begun else first, delay)
        if not hit:
            t_full = max(1.05 * t_first, 0.85 * t_full)  # the machine got faster than the reference run
        real += hit
        log.append(check_state(job, out))
    if not started(job, out):
        run(first)
    run(again)
    check_state(job, out)
    compare(job, ref, out)
    if real < kills:
        raise RuntimeError(f"only {real} of {attempts} kills hit a running {job} process; the machine is too noisy")
    return {
        "job": job,
        "kills": attempts,
        "killed_while_running": real,
        "restarts": restarts,
        "uninterrupted_s": round(t_ref, 1),
        "first_write_s": round(t_first, 1),
        "states": log,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--jobs", default="mdlm,ddp,dflash,eagle3,chat,features")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    failures = []
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        paths = setup(work)
        for job in args.jobs.split(","):
            try:
                r = inject(job, args.kills, paths, work, rng)
                print(
                    f"{job:9s} ok: {r['killed_while_running']} kills hit a "
                    f"running process ({r['kills']} tries), {r['restarts']} fresh "
                    f"restarts (uninterrupted {r['uninterrupted_s']} s, first write at {r['first_write_s']} s); "
                    f"states after kills: {r['states'][:5]} ...",
                    flush=True,
                )
            except Exception as e:
                failures.append(job)
                print(f"{job:9s} FAILED: {type(e).__name__}: {e}", flush=True)
    if failures:
        sys.exit(f"fault injection failed for: {', '.join(failures)}")
    print("fault injection: every job resumed from its last complete state and matched the uninterrupted run")


if __name__ == "__main__":
    main()
