"""The prepared device check: what only a GPU can tell, in one run of a few minutes.

    python tools/gpu_check.py                      # on a CUDA machine: SmolLM2 target, reference-like sizes
    python tools/gpu_check.py --quick --device cpu # the same steps on a tiny random target (checks this script itself)

On a machine without the SmolLM2 GGUF (the device machines lent here cannot install it, and the 98 MB file is larger
than what travels to them), first run `python tools/gpu_check.py --prepare-shape .gpucheck/smollm2-shape` where it is
installed: that saves SmolLM2's config and tokenizer (no weights, a few MB). Then on the GPU machine pass
`--target-shape .gpucheck/smollm2-shape`: the target is a random-weight model of exactly SmolLM2's shape and vocabulary,
which is all that speed, memory and losslessness depend on (tau and the drafters' losses are then meaningless). The
package needs no install there: commands run as `python -c "from mdlm_kit.cli.main import main; ..."` from the
repository.

Everything in the kit is tested on the CPU; this script runs the CUDA-specific paths the CPU cannot, through the same
commands a user runs, and prints one JSON summary (also written to OUT/gpu_check.json):

1. `env`: torch and CUDA versions, the device, bf16 support.
2. `mdlm`: `mdlm-kit train --config configs/gpu_small.toml` as shipped (90 M parameters, bf16 autocast, fused attention
   only) for a few steps on the embedded corpus, eager and with `training.compile = true` (the config's own setting):
   tokens/s and peak memory of each after warm-up, and that the two runs' losses agree.
3. `mdlm_resume`: the run paused halfway and resumed on the GPU, against the uninterrupted one (largest loss difference;
   CUDA kernels need not be bit-reproducible, so this is reported, not required to be 0).
4. `dflash_attention`: `bench/dflash_attention.py` at the reference recipe's 3,072 tokens and 512 anchors x 16:
   dense-mask SDPA, the structured backend and flex_attention, time and peak memory.
5. `drafters`: `make-chat-data`, then `train-dflash` with `--attention-backend flex_attention` and `sdpa` (same seed:
   their losses must agree) and `train-eagle3`, all bf16.
6. `speculate`: both drafters through `mdlm-kit speculate` on the GPU: lossless at temperature 0, tau, speedup.

A failing step is recorded with its error and the rest still run; the exit code is 1 if any step failed."""

import argparse, json, os, subprocess, sys, tempfile, time, traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).parent / "mdlm-kit")
ENV = {
    **os.environ,
    "TOKENIZERS_PARALLELISM": "false",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
}
# the installed console script, or the same entry point from this checkout where the package is not installed
CLI = (
    [EXE]
    if Path(EXE).exists()
    else [sys.executable, "-c", "import sys; from mdlm_kit.cli.main import main; sys.exit(main())"]
)


def sh(cmd, timeout=900) -> str:
    r = subprocess.run([str(c) for c in cmd], env=ENV, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if r.returncode:
        raise RuntimeError(f"{' '.join(map(str, cmd[:2]))} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return r.stdout


def events(run: Path, kind: str) -> list[dict]:
    return [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["event"] == kind]


def check_env(a, work):
    import torch

    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": a.device}
    if a.device.startswith("cuda"):
        out.update(
            name=torch.cuda.get_device_name(0),
            bf16=torch.cuda.is_bf16_supported(),
            memory_gib=round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
        )
    return out


def mdlm_args(a, work, run, extra=()):
    """`mdlm-kit train` as the check runs it: configs/gpu_small.toml as shipped (its model, batch and compile
    settings), a few steps, on the embedded corpus (the device machines reach no hub); --quick: a tiny model."""
    config = [] if a.quick else ["--config", ROOT / "configs" / "gpu_small.toml", "--set", "data.corpus=embedded"]
    size = (
        [
            "model.n_layer=2",
            "model.d_model=64",
            "model.n_head=2",
            "model.max_seq_len=64",
            "data.block_size=64",
            "training.batch_size=8",
            "data.tokenizer_vocab_size=512",
        ]
        if a.quick
        else []
    )
    sets = size + [
        f"training.max_steps={a.mdlm_steps}",
        "training.log_interval=10",
        "training.eval_interval=100000",
        f"training.save_interval={a.mdlm_steps // 2}",
        "training.warmup_steps=5",
        f"data.data_dir={work / 'mdlm-data'}",
        *extra,
    ]
    cmd = [
        *CLI,
        "train",
        *config,
        "--output-dir",
        run,
        "--no-progress",
        "--set",
        f"device={a.device}",
        "--set",
        f"precision={a.precision}",
    ]
    if a.device.startswith("cuda"):
        cmd += ["--set", "forbid_math_sdpa=true"]
    for s in sets:
        cmd += ["--set", s]
    return cmd


# dropout off: compiled and eager steps draw their dropout masks differently, and their losses must agree
EAGER = ("training.compile=false", "model.dropout=0.0")
COMPILED = ("training.compile=true", "model.dropout=0.0")


def check_mdlm(a, work):
    out = {}
    for name, extra in (("eager", EAGER), ("compiled", COMPILED)):
        run = work / f"mdlm-{name}"
        t0 = time.perf_counter()
        sh(mdlm_args(a, work, run, extra))
        wall = time.perf_counter() - t0
        tr = events(run, "train")
        out[name] = {
            "wall_s": round(wall, 1),
            "tokens_per_s": tr[-1]["tokens_per_sec"],
            "final_loss": tr[-1]["loss"],
            "peak_memory": {k: v for k, v in tr[-1].items() if "mem" in k},
            "compiled_graphs": [x.get("compiled_graphs", 0) for x in tr],  # growing from log to log: recompiles
        }
    e, c = events(work / "mdlm-eager", "train"), events(work / "mdlm-compiled", "train")
    out["compiled_over_eager"] = round(out["compiled"]["tokens_per_s"] / out["eager"]["tokens_per_s"], 3)
    out["max_rel_loss_diff"] = round(max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(e, c)), 4)
    out["first_rel_loss_diff"] = round(abs(e[0]["loss"] - c[0]["loss"]) / abs(e[0]["loss"]), 5)
    # same weights and batches: the first logged losses agree to kernel rounding, later ones drift only by chaos
    if out["first_rel_loss_diff"] > 5e-3 or out["max_rel_loss_diff"] > 0.02:
        raise AssertionError(f"compiled and eager losses differ: {out}")
    return out


def check_mdlm_resume(a, work):
    run = work / "mdlm-paused"
    sh(mdlm_args(a, work, run, EAGER) + ["--max-run-steps", str(a.mdlm_steps // 2)])
    sh(mdlm_args(a, work, run, EAGER) + ["--resume"])
    ref, got = events(work / "mdlm-eager", "train"), events(run, "train")
    if [e["step"] for e in ref] != [e["step"] for e in got]:
        raise AssertionError("the resumed run logged other steps")
    return {
        "max_abs_loss_diff": max(abs(x["loss"] - y["loss"]) for x, y in zip(ref, got)),
        "bit_equal": all(x["loss"] == y["loss"] for x, y in zip(ref, got)),
    }


def check_attention_exact(a, work):
    "The three DFlash attention backends on one random problem agree element by element, and a one-off mask does not."
    import torch
    from mdlm_kit.drafts.dflash import BlockStructure, _attend, dflash_attention_mask, dflash_mask_mod, sample_anchors

    dev = torch.device(a.device)
    torch.manual_seed(0)
    S, N, bs, h, d = 96, 8, 4, 2, 32
    anchors, keep = sample_anchors(torch.ones(2, S, dtype=torch.bool), N, [0, 1])
    anchors, keep = anchors.to(dev), keep.to(dev)
    q = torch.randn(2, h, N * bs, d, device=dev)
    k, v = (torch.randn(2, h, S + N * bs, d, device=dev) for _ in range(2))

    def run(backend, anc):
        if backend == "structured":
            mask = BlockStructure(anc, keep, S, bs)
        elif backend == "flex_attention":
            from torch.nn.attention.flex_attention import create_block_mask

            mask = create_block_mask(dflash_mask_mod(anc, keep, S, bs), 2, None, N * bs, S + N * bs, device=dev)
        else:
            mask = dflash_attention_mask(anc, keep, S, bs)
        return _attend(q, k, v, mask, backend).float()

    ref = run("eager", anchors)
    backends = ["sdpa", "structured"] + (["flex_attention"] if dev.type == "cuda" else [])
    out = {b: float((run(b, anchors) - ref).abs().max()) for b in backends}
    out["one_off_mask"] = float((run("eager", anchors + 1) - ref).abs().max())  # the control: a wrong mask
    tol = 1e-3
    bad = {b: x for b, x in out.items() if b != "one_off_mask" and x > tol}
    if bad or out["one_off_mask"] < 10 * tol:
        raise AssertionError(f"attention backends vs eager (max abs diff, tolerance {tol}): {out}")
    return out


def check_dflash_attention(a, work):
    sizes = (
        ["--seq", "256", "--anchors", "32", "--block", "4"]
        if a.quick
        else ["--seq", "3072", "--anchors", "512", "--block", "16"]
    )
    text = sh([sys.executable, ROOT / "bench" / "dflash_attention.py", "--device", a.device, *sizes])
    if "outputs differ" in text:
        raise AssertionError(text)
    return {"table": text.strip().splitlines()}


def prepare_shape(directory: Path):
    "Save SmolLM2's config and tokenizer (no weights) for `--target-shape` on a machine without the GGUF."
    from mdlm_kit.drafts.targets import TargetModel

    tgt = TargetModel.from_pretrained("smollm2", load_tokenizer=True)
    directory.mkdir(parents=True, exist_ok=True)
    tgt.model.config.save_pretrained(directory)
    tgt.tokenizer.save_pretrained(directory)
    print(f"saved SmolLM2's config and tokenizer to {directory}")


def make_target(a, work) -> str:
    if a.target_shape:  # random weights in the real shape and vocabulary
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(a.target_shape))
        model.save_pretrained(work / "target")
        AutoTokenizer.from_pretrained(a.target_shape).save_pretrained(work / "target")
        return str(work / "target")
    if not a.quick:
        return "smollm2"
    from mdlm_kit.drafts.targets import tiny_target

    tgt = tiny_target("qwen3", num_layers=5)
    tgt.model.save_pretrained(work / "target")
    tgt.tokenizer.save_pretrained(work / "target")
    return str(work / "target")


def train_figures(run: Path) -> dict:
    """A drafter run's logged losses, and its speed, peak memory and compiled graphs at the last log (after the
    warm-up): compiled graphs that keep growing from log to log are recompilations."""
    tr = events(run, "train")
    return {
        "losses": [round(e["loss"], 4) for e in tr],
        "tokens_per_s": tr[-1].get("tokens_per_sec"),
        "peak_memory": {k: v for k, v in tr[-1].items() if "mem" in k},
        "compiled_graphs": [e.get("compiled_graphs", 0) for e in tr],
    }


def check_drafters(a, work):
    target, chat = make_target(a, work), work / "chat.jsonl"
    n = 16 if a.quick else 256
    sh(
        [
            *CLI,
            "make-chat-data",
            "--target",
            target,
            "--num-prompts",
            n,
            "--output",
            chat,
            "--batch-size",
            8 if a.quick else 64,
            "--max-new-tokens",
            16 if a.quick else 128,
            "--device",
            a.device,
            "--no-progress",
        ]
    )
    if a.quick:  # a random target answers with nothing useful: train on documentation text instead
        from mdlm_kit.drafts.chat_data import topics_chat

        chat = topics_chat(work / "chat-docs.jsonl", 32, answer_chars=400)
    common = [
        "--target-model-path",
        target,
        "--train-data-path",
        chat,
        "--batch-size",
        2 if a.quick else 8,
        "--max-steps",
        a.draft_steps,
        "--log-interval",
        5,
        "--eval-interval",
        100000,
        "--save-interval",
        100000,
        "--device",
        a.device,
        "--precision",
        a.precision,
        "--no-progress",
        "--seed",
        1,
    ]
    dflash = [
        "--block-size",
        4 if a.quick else 16,
        "--num-anchors",
        8 if a.quick else 256,
        "--max-length",
        128 if a.quick else 1024,
        "--num-feature-layers",
        2 if a.quick else 5,
    ]
    out = {}
    backends = ["sdpa", "flex_attention"] if a.device.startswith("cuda") else ["sdpa", "structured"]
    for b in backends:
        run = work / f"dflash-{b}"
        t0 = time.perf_counter()
        sh([*CLI, "train-dflash", *common, *dflash, "--attention-backend", b, "--output-dir", run])
        out[f"dflash_{b}"] = {"wall_s": round(time.perf_counter() - t0, 1), **train_figures(run)}
    la, lb = (out[f"dflash_{b}"]["losses"] for b in backends)
    out["dflash_backends_max_rel_diff"] = round(max(abs(x - y) / abs(x) for x, y in zip(la, lb)), 4)
    out["dflash_backends_first_rel_diff"] = round(abs(la[0] - lb[0]) / abs(la[0]), 5)
    if out["dflash_backends_first_rel_diff"] > 5e-3 or out["dflash_backends_max_rel_diff"] > 0.02:
        raise AssertionError(f"{backends} losses differ: {la} vs {lb}")
    run = work / "eagle3"
    t0 = time.perf_counter()
    sh([*CLI, "train-eagle3", *common, "--max-length", 128 if a.quick else 1024, "--output-dir", run])
    out["eagle3"] = {"wall_s": round(time.perf_counter() - t0, 1), **train_figures(run)}
    a.target, a.drafts = target, {"dflash": work / f"dflash-{backends[0]}" / "draft", "eagle3": run / "draft"}
    return out


def _speculate(a, draft: str, prompts, output: Path, max_new_tokens: int, *extra) -> dict:
    "`mdlm-kit speculate` with one drafter on the checked device; its JSON result."
    sh(
        [
            *CLI,
            "speculate",
            "--target",
            a.target,
            "--draft",
            draft,
            "--prompts",
            prompts,
            "--output",
            output,
            "--max-new-tokens",
            max_new_tokens,
            "--device",
            a.device,
            "--no-progress",
            *extra,
        ]
    )
    return json.loads(output.read_text())


def check_speculate(a, work):
    if not getattr(a, "drafts", None):
        raise RuntimeError("no drafters (the drafters step failed)")
    prompts = work / "prompts.txt"
    prompts.write_text(
        "\n".join(
            [
                "What does the Python keyword yield do?",
                "Explain list comprehensions.",
                "How do I read a file line by line?",
                "What is a decorator?",
            ][: 2 if a.quick else 4]  # --quick checks the script itself: two prompts show every path
        )
    )
    out = {}
    for name, d in a.drafts.items():
        res = _speculate(a, d, prompts, work / f"speculate-{name}.json", 32 if a.quick else 128)
        out[name] = {k: res[k] for k in ("tau_pooled", "tokens_per_s", "baseline_tokens_per_s", "speedup", "lossless")}
        if res["lossless"] is not True:
            raise AssertionError(f"{name}: speculative output differs from greedy decoding: {out}")
    # sampled decoding (the device's probabilities, the CPU generator's draws) and the EAGLE-3 tree, on the device
    for name, extra in (
        ("dflash-sampled", ["--temperature", "0.8", "--top-k", "20"]),
        ("eagle3-sampled", ["--temperature", "0.8", "--top-p", "0.9"]),
        ("eagle3-tree", ["--tree-nodes", "8", "--num-draft-tokens", "3"]),
    ):
        d = a.drafts[name.split("-")[0]]
        res = _speculate(a, d, prompts, work / f"speculate-{name}.json", 32, "--baseline", *extra)
        out[name] = {k: res.get(k) for k in ("tau_pooled", "tokens", "speedup", "lossless")}
        if res["tokens"] < 4:
            raise AssertionError(f"{name}: decoded only {res['tokens']} tokens: {res}")
        if name == "eagle3-tree" and res["lossless"] is not True:
            raise AssertionError(f"{name}: not lossless: {res}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="auto", help="auto: bf16 on a bf16 GPU, fp32 on the CPU")
    ap.add_argument("--quick", action="store_true", help="a tiny random target and tiny sizes (minutes on a CPU)")
    ap.add_argument("--mdlm-steps", type=int, default=0, help="MDLM steps per run (default 20 quick, 60 full)")
    ap.add_argument("--draft-steps", type=int, default=0, help="drafter steps per run (default 10 quick, 40 full)")
    ap.add_argument("--only", default="", help="comma list of steps to run (default: all)")
    ap.add_argument(
        "--out", default="", help="where to keep the runs and gpu_check.json (default: a temporary directory)"
    )
    ap.add_argument(
        "--target-shape", default="", help="a directory from --prepare-shape: use a random target of that shape"
    )
    ap.add_argument("--prepare-shape", default="", help="save SmolLM2's config and tokenizer here, then exit")
    a = ap.parse_args(argv)
    if a.prepare_shape:
        return prepare_shape(Path(a.prepare_shape))
    a.mdlm_steps = a.mdlm_steps or (20 if a.quick else 60)
    a.draft_steps = a.draft_steps or (10 if a.quick else 40)
    steps = [
        ("env", check_env),
        ("mdlm", check_mdlm),
        ("mdlm_resume", check_mdlm_resume),
        ("attention_exact", check_attention_exact),
        ("dflash_attention", check_dflash_attention),
        ("drafters", check_drafters),
        ("speculate", check_speculate),
    ]
    only = {s for s in a.only.split(",") if s}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.out or tmp)
        work.mkdir(parents=True, exist_ok=True)
        summary, failed = {}, []
        for name, fn in steps:
            if only and name not in only:
                continue
            t0 = time.perf_counter()
            try:
                summary[name] = {"ok": True, **fn(a, work)}
            except Exception as e:
                failed.append(name)
                summary[name] = {
                    "ok": False,
                    "error": f"{type(e).__name__}: {e}"[-3000:],
                    "where": traceback.format_exc(limit=3)[-1500:],
                }
            summary[name]["seconds"] = round(time.perf_counter() - t0, 1)
            print(f"{name}: {'ok' if summary[name]['ok'] else 'FAILED'} in {summary[name]['seconds']} s", flush=True)
        text = json.dumps(summary, indent=1, default=str)
        (work / "gpu_check.json").write_text(text)
        print(text)
    if failed:
        sys.exit(f"gpu check failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
