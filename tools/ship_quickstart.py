"""Ship the quickstart MDLM that the lessons read, with where it came from.

    python tools/ship_quickstart.py                      # trains runs/quickstart with `mdlm-kit quickstart`, ships it
    python tools/ship_quickstart.py --run runs/shipped   # ships a finished quickstart run

It copies the run's inference directory (config.json, model.safetensors in bf16, the tokenizer) into
nbs/data/quickstart_mdlm/ and writes beside it:
- provenance.json: the command, the kit's commit, torch, the machine, the steps, the weights' sha256, the final bound;
- validation.json: the validation bound at every evaluation of the run, and the unigram entropy of the same text;
- noise_levels.json: one validation sentence masked at three noise levels and the model's one-pass guesses (lesson 07);
- samples.json: what the quickstart prints at the end, one sample per sampler, with the share of known words.
"""

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "nbs" / "data" / "quickstart_mdlm"
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
LEVELS = (0.15, 0.5, 0.85)  # the noise levels lesson 07 shows
WINDOW = 40  # tokens of the sentence


def _finished(run: Path) -> bool:
    from mdlm_kit.core.checkpoint import read_events

    cfg = (run / "config.toml").read_text() if (run / "config.toml").exists() else ""
    steps = (
        [e["step"] for e in read_events(run / "events.jsonl", "validation")] if (run / "events.jsonl").exists() else []
    )
    want = next((int(line.split("=")[1]) for line in cfg.splitlines() if line.startswith("max_steps")), None)
    return bool(steps) and want is not None and steps[-1] == want and (run / "inference" / FILES[1]).exists()


def _commit() -> str:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "mdlm_kit"], cwd=ROOT, capture_output=True, text=True)
    return head + ("+changes" if dirty.stdout.strip() else "")


def _sentence(tok, val) -> list[int]:
    "The first WINDOW tokens of the validation text that start a sentence and are prose (words and punctuation)."
    ids = [int(i) for i in np.asarray(val).ravel()]
    for i in range(1, len(ids) - WINDOW):
        window = tok.decode(ids[i : i + WINDOW])
        if tok.decode(ids[max(0, i - 3) : i]).endswith((". ", "\n")) and window[:1].isupper():
            prose = all(c.isalnum() or c in " ,.;:()'-\n" for c in window) and "  " not in window
            if prose and tok.eos_token_id not in ids[i : i + WINDOW]:
                return ids[i : i + WINDOW]
    raise SystemExit("no plain-prose sentence of WINDOW tokens in the validation text")


@torch.no_grad()
def noise_levels(model, tok, val, seed: int = 0) -> dict:
    "The sentence masked at each level (one random order, so a level's masks hold the lower level's) and the guesses."
    ids = torch.tensor(_sentence(tok, val))
    order = torch.randperm(WINDOW, generator=torch.Generator().manual_seed(seed))
    levels = []
    for t in LEVELS:
        masked = torch.zeros(WINDOW, dtype=torch.bool)
        masked[order[: round(t * WINDOW)]] = True
        x = torch.where(masked, model.config.mask_token_id, ids)[None]
        guess = model(x, predict_mask=masked[None]).argmax(-1)  # one pass, the most likely token at each mask
        filled = ids.clone()
        filled[masked] = guess
        levels.append(
            {
                "t": t,
                "masked": masked.tolist(),
                "guesses": [tok.decode([int(i)]) for i in filled],
                "right": int((filled[masked] == ids[masked]).sum()),
                "n_masked": int(masked.sum()),
            }
        )
    return {"tokens": [tok.decode([int(i)]) for i in ids], "seed": seed, "levels": levels}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default="runs/quickstart", help="a quickstart run directory (trained first if unfinished)")
    args = ap.parse_args()
    run = Path(args.run)
    command = f"mdlm-kit quickstart --output-dir {run} --no-progress"
    if not _finished(run):
        print(f"training: {command}", flush=True)
        subprocess.run([str(Path(sys.executable).parent / "mdlm-kit"), *command.split()[1:]], check=True)

    from mdlm_kit.cli.main import QUICKSTART_SAMPLES
    from mdlm_kit.mdlm.block import sample_texts
    from mdlm_kit.core.checkpoint import read_events
    from mdlm_kit.core.device import machine_summary
    from mdlm_kit.mdlm.sampling import load_inference
    from mdlm_kit.text.data import PackedData, known_word_fraction

    OUT.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copyfile(run / "inference" / name, OUT / name)
    model, tok = load_inference(OUT, "cpu")
    data = PackedData(run / "data")
    vals = read_events(run / "events.jsonl", "validation")
    trains = read_events(run / "events.jsonl", "train")
    cfg = json.loads((OUT / "config.json").read_text())
    provenance = {
        "command": command,
        "then": f"python tools/ship_quickstart.py --run {run}",
        "config": "configs/quickstart.toml (the built-in quickstart config)",
        "kit_commit": _commit(),
        "torch": torch.__version__,
        "machine": machine_summary(),
        "threads": torch.get_num_threads(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "trained_steps": cfg["trained_steps"],
        "training_minutes": round((trains[-1]["time"] - trains[0]["time"]) / 60, 1),
        "weights": "bf16 (the trainer's inference export); the trainer itself kept fp32 weights",
        "model_safetensors_sha256": hashlib.sha256((OUT / FILES[1]).read_bytes()).hexdigest(),
        "bytes": sum((OUT / n).stat().st_size for n in FILES),
        "final_validation_bound": vals[-1]["elbo_nats_per_token"],
    }
    validation = {
        "unigram_nats_per_token": data.unigram_entropy("val"),
        "batch_size": 8,
        "block_size": data.block_size,
        "points": [{"step": e["step"], "bound": e["elbo_nats_per_token"]} for e in vals],
    }
    words = data.words("train")
    samples = []
    for title, prompt, settings in QUICKSTART_SAMPLES:
        text = sample_texts(model, tok, prompt, settings)[0]
        known = known_word_fraction(text[len(prompt) :], words)
        samples.append({"title": title, "prompt": prompt, "text": text, "known_words": round(known, 3)})
    levels = noise_levels(model, tok, data.split("val"))
    for name, obj in [("provenance", provenance), ("validation", validation), ("samples", samples)]:
        (OUT / f"{name}.json").write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
    (OUT / "noise_levels.json").write_text(json.dumps(levels, indent=1, ensure_ascii=False) + "\n")
    print(f"shipped {run} into {OUT.relative_to(ROOT)} ({provenance['bytes'] / 1e6:.1f} MB)")
    for s in samples:
        print(f"--- {s['title']} ({s['known_words']:.0%} known words)\n{s['text']}")


if __name__ == "__main__":
    main()
