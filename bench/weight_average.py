"""Does an average of the weights narrow the MDLM's seed spread? Trains each seed as `mdlm-kit sweep` trains its
2,400-step constant-rate run, keeping several exponential moving averages of the weights beside it (lesson 10's
`WeightAverage`, decays `--decays`), and scores the last weights and every average on the whole validation split
at 16 noise levels, as the sweep scores a run.

    python bench/weight_average.py runs/sweep_wsd_ar_mdlm/data --seeds 0,1,2 --output-dir runs/ema_s012 \\
        --output nbs/data/weight_average_s012.json

The averages do not change training (the run is the sweep's, `training.ema_decay` left at 0), so a seed's last
weights score as the constant-rate sweep's row for that seed, and each average is compared with them on the same
trajectory. The averages live in memory only: a killed seed is trained again from step 0.
"""

import json
import shutil
import sys
import time
from pathlib import Path
from mdlm_kit.core.checkpoint import atomic_write_text
from mdlm_kit.core.config import apply_overrides, load_config
from mdlm_kit.core.device import machine_summary
from mdlm_kit.core.loop import WeightAverage
from mdlm_kit.mdlm.train import Trainer, score_split
from mdlm_kit.text.data import PackedData

sys.path.insert(0, str(Path(__file__).parent))
from bench_flags import bench_parser  # noqa: E402


def averaged_run(cfg, run: Path, decays: list[float], levels: int) -> dict:
    "Train `cfg` in `run` (from step 0) with an average per decay; the last weights' and each average's bound."
    shutil.rmtree(run, ignore_errors=True)  # the averages are not in the checkpoints: start again
    trainer = Trainer(cfg, run, progress=False, log=lambda *a: None)
    avgs = {d: WeightAverage(trainer.model, d) for d in decays}
    step = trainer.train_step

    def train_step():  # the trainer's own step, then every average
        rec = step()
        for w in avgs.values():
            w.update()
        return rec

    trainer.train_step = train_step
    t0 = time.perf_counter()
    trainer.run()
    seconds = time.perf_counter() - t0
    data, objective = trainer.data, cfg.training.objective
    score = lambda: round(
        score_split(trainer.model, data, objective, "val", n_levels=levels, cfg=cfg)["nats_per_token"], 5
    )
    out = {"last": score()}
    for d, w in avgs.items():
        with w.applied():
            out[str(d)] = score()
    return {"seed": cfg.training.seed, "steps": trainer.step, "train_seconds": round(seconds, 1), "nats_per_token": out}


def main(argv=None):
    ap = bench_parser(__doc__, "weight_average.json", target=False)
    ap.add_argument("data", type=Path, help="a packed data directory (a sweep's data/)")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated training seeds")
    ap.add_argument("--decays", default="0.99,0.995,0.998,0.999", help="comma-separated decays of the averages")
    ap.add_argument("--max-steps", type=int, default=2400, help="steps at a constant rate after the warm-up")
    ap.add_argument("--objective", default="mdlm", help="mdlm, ar or bd3lm (training.objective)")
    ap.add_argument("--levels", type=int, default=16, help="noise levels of the bound, as the sweep scores")
    ap.add_argument("--output-dir", type=Path, required=True, help="where the runs are trained")
    ap.add_argument("--config", help="a TOML config (default: the built-in quickstart config, as the sweep's)")
    ap.add_argument("--set", action="append", default=[], help="a config override, as mdlm-kit sweep --set takes")
    a = ap.parse_args(argv)
    if not (a.data / "meta.json").is_file():
        raise SystemExit(
            f"{a.data}: not a packed data directory (no meta.json); run mdlm-kit prepare or a sweep first."
        )
    decays = [float(d) for d in a.decays.split(",")]
    meta = PackedData(a.data).meta
    rows, out = [], Path(a.output)
    record = {  # what does not change from one seed to the next; the rows are added as they come
        "command": " ".join(["python", "bench/weight_average.py", *(argv or sys.argv[1:])]),
        "data": {"tokenizer": meta["tokenizer_sha256"], "corpus": meta["corpus_sha256"]},
        "decays": decays,
        "machine": machine_summary(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    for seed in [int(s) for s in a.seeds.split(",")]:
        items = [f'training.objective="{a.objective}"', f"training.seed={seed}", f"training.max_steps={a.max_steps}"]
        cfg = apply_overrides(load_config(a.config), a.set + items + [f"data.data_dir={json.dumps(str(a.data))}"])
        rows.append(averaged_run(cfg, a.output_dir / f"{a.objective}_seed{seed}", decays, a.levels))
        print(json.dumps(rows[-1]), flush=True)
        atomic_write_text(out, json.dumps(record | {"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
