"""Is a sweep point's seed spread the training's or the measurement's? Scores the runs of one objective and budget in a
`mdlm-kit sweep` directory again, each under several draws of the evaluation's masks.

    python bench/bound_draws.py runs/sweep_wsd_ar_mdlm --objective mdlm --steps 2400 --draws 4 \\
        --output nbs/data/bound_draws.json

`mdlm-kit sweep` scores an MDLM with one draw of masks per block and noise level (draw 0, the same masks for every
run, so runs are compared on common masks). Draw d reseeds those masks (`elbo_bound(seed=d)`); the exact NLL of the
AR twin has no draw. If the runs' order and gaps hold under every draw, the spread between seeds is the training's.
Each run is read from its inference directory, whose weights are saved in bf16, so draw 0 comes within a few 1e-4
of the sweep's row (scored on the fp32 weights in training); every figure here compares the same saved weights.
"""

import json
import re
import sys
import torch
from pathlib import Path
from mdlm_kit.core.checkpoint import atomic_write_text
from mdlm_kit.core.device import machine_summary
from mdlm_kit.mdlm.diffusion import elbo_bound
from mdlm_kit.mdlm.sampling import load_inference
from mdlm_kit.text.data import PackedData

sys.path.insert(0, str(Path(__file__).parent))
from bench_flags import bench_parser  # noqa: E402


def seed_runs(sweep: Path, objective: str, steps: int) -> dict[int, Path]:
    "Each seed's inference directory in a sweep whose model was trained `steps` steps (its config's `trained_steps`)."
    found = {}
    for d in sorted((sweep / "runs").glob(f"{objective}_seed*_frac1*/inference")):
        m = re.fullmatch(rf"{objective}_seed(\d+)_frac1(_steps\d+)?", d.parent.name)
        if m and json.loads((d / "config.json").read_text()).get("trained_steps") == steps:
            found[int(m[1])] = d
    return found


def main(argv=None):
    ap = bench_parser(__doc__, "bound_draws.json", target=False)
    ap.add_argument("sweep", type=Path, help="a mdlm-kit sweep directory (its data/ and runs/)")
    ap.add_argument("--objective", default="mdlm", help="mdlm (the bound with random masks)")
    ap.add_argument("--steps", type=int, default=2400, help="the budget whose runs are scored")
    ap.add_argument("--draws", type=int, default=4, help="draws of masks (draw 0 is the sweep's own)")
    ap.add_argument("--levels", type=int, default=16, help="noise levels, as the sweep scores")
    a = ap.parse_args(argv)
    if a.objective != "mdlm":
        raise SystemExit("--objective: only mdlm has masks to draw (ar is exact; bd3lm's bound draws once per level).")
    data = PackedData(a.sweep / "data")
    runs = seed_runs(a.sweep, a.objective, a.steps)
    if len(runs) < 2:
        raise SystemExit(f"{a.sweep}: fewer than two {a.objective} runs at {a.steps} steps; run the sweep first.")
    batches = data.batches("val", 16)  # as the sweep scores (score_split)
    by_seed = {}
    for seed, path in runs.items():
        model = load_inference(path, "cpu")[0]
        mask = model.config.mask_token_id
        by_seed[seed] = [
            round(elbo_bound(model, batches, mask, n_levels=a.levels, seed=d)["nats_per_token"], 5)
            for d in range(a.draws)
        ]
        print(f"seed {seed}: {by_seed[seed]}", flush=True)
    per_draw = list(zip(*by_seed.values()))  # (draws, seeds)
    out = {
        "command": "python bench/bound_draws.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine_summary(),
        "objective": a.objective,
        "steps": a.steps,
        "levels": a.levels,
        "val_blocks": data.meta["n_val_blocks"],
        "nats_per_token": {str(s): v for s, v in by_seed.items()},
        "seed_spread_by_draw": [round(max(d) - min(d), 5) for d in per_draw],
        "draw_spread_by_seed": {str(s): round(max(v) - min(v), 5) for s, v in by_seed.items()},
    }
    print(f"seed spread under each draw: {out['seed_spread_by_draw']}")
    print(f"draw spread of each seed: {out['draw_spread_by_seed']}")
    print(f"wrote {atomic_write_text(a.output, json.dumps(out, indent=1))}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
