"""Ship what lesson 13 reads from `mdlm-kit sweep` runs: their rows merged into nbs/data/block_sweep.json (with each
sweep's command), and one block-diffusion run's inference directory as nbs/data/bd3lm_quickstart/ (bf16 weights, its
tokenizer, provenance.json); with --output another file of rows (the repetition sweep's), and no model.

    python tools/ship_block_sweep.py --sweeps runs/sweep_bd3lm runs/sweep_armdlm runs/sweep_blocks \\
        --model runs/sweep_bd3lm/runs/bd3lm4_seed0_frac1
    python tools/ship_block_sweep.py --sweeps runs/sweep_rep05 runs/sweep_rep25 --output repetition_sweep.json
    python tools/ship_block_sweep.py --sweeps runs/sweep_s1 --output shakespeare_sweep.json --merge

A row of a sweep trained with a clipped schedule (`training.sampling_eps_min`/`sampling_eps_max`) records the
interval its noise levels were drawn from as `noise_interval`, read from the sweep's saved config.

With --merge the rows and commands already shipped in the output file are kept (new seeds beside old ones), and a row
of the same objective, block, steps, seed and corpus fraction is refused.

The sweeps must share one packed data set (same corpus, tokenizer and validation split) and one schedule (the same
`--decay-fraction`, recorded as `decay_fraction`): checked.
"""

import argparse
import hashlib
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def clipped(config: dict) -> dict:
    """A sweep row's interval of training noise levels (`TrainingConfig.noise_interval`, lesson 03), where a clipped
    schedule (lesson 13) narrowed it; else nothing."""
    from mdlm_kit.core.config import from_dict

    tc = from_dict(config).training
    return {"noise_interval": list(tc.noise_interval)} if tc.sampling_eps_min > 0 or tc.sampling_eps_max < 1 else {}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweeps", nargs="+", required=True, help="sweep output directories")
    ap.add_argument("--model", default="", help="the run whose inference directory to ship (none: rows only)")
    ap.add_argument("--output", default="block_sweep.json", help="the file in nbs/data the rows go to")
    ap.add_argument("--merge", action="store_true", help="keep the rows already in the output file (same data only)")
    ap.add_argument("--note", action="append", default=[], help="a sentence on the runs' provenance (repeatable)")
    args = ap.parse_args()
    rows, commands, data_keys, notes, decays = [], [], set(), [], set()
    for d in map(Path, args.sweeps):
        rec = json.loads((d / "sweep.json").read_text())
        meta = json.loads((d / "data" / "meta.json").read_text())
        data_keys.add((meta["tokenizer_sha256"], meta["corpus_sha256"], meta["n_val_blocks"]))
        interval = clipped(rec["config"])  # one config a sweep
        rows += [r | interval for r in rec["rows"]]
        commands.append(rec["command"])
        decays.add(rec.get("decay_fraction", 0.0))
    out = ROOT / "nbs" / "data"
    if args.merge:
        old = json.loads((out / args.output).read_text())
        data_keys.add(tuple(old["data"][k] for k in ("tokenizer", "corpus", "val_blocks")))
        key = lambda r: (r["objective"], r["block_length"], r["steps"], r["seed"], r["corpus_fraction"])
        if twice := {key(r) for r in old["rows"]} & {key(r) for r in rows}:
            raise SystemExit(f"rows already shipped in {args.output}: {sorted(twice, key=str)}")
        rows, commands = old["rows"] + rows, old["commands"] + commands
        decays.add(old.get("decay_fraction", 0.0))
        notes = old.get("notes", [])  # what the earlier sweeps' provenance needs said (kept; edit them by hand)
    if len(data_keys) != 1:
        raise SystemExit(f"the sweeps were packed differently ({data_keys}); merge only sweeps of one data set.")
    if len(decays) != 1:
        raise SystemExit(f"the sweeps decay differently (--decay-fraction {sorted(decays)}); merge only one schedule.")
    record = {
        "commands": commands,
        "data": dict(zip(("tokenizer", "corpus", "val_blocks"), data_keys.pop())),
        "rows": rows,
    }
    notes += args.note
    record |= ({"decay_fraction": decays.pop()} if decays != {0.0} else {}) | ({"notes": notes} if notes else {})
    (out / args.output).write_text(json.dumps(record, indent=1) + "\n")
    print(f"{len(rows)} rows into nbs/data/{args.output}")
    if not args.model:
        return
    run, ship = Path(args.model), out / "bd3lm_quickstart"
    ship.mkdir(exist_ok=True)
    for name in FILES:
        shutil.copyfile(run / "inference" / name, ship / name)
    cfg = json.loads((ship / "config.json").read_text())
    provenance = {
        "command": next(c for c in commands if "bd3lm" in c),
        "run": str(run),
        "objective": cfg["objective"],
        "block_length": cfg["block_length"],
        "trained_steps": cfg["trained_steps"],
        "model_safetensors_sha256": hashlib.sha256((ship / "model.safetensors").read_bytes()).hexdigest(),
    }
    (ship / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
    print(f"{run} shipped as {ship.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
