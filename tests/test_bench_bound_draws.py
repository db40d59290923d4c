"""`bench/bound_draws.py`: the MDLM runs of one budget in a sweep, each scored under several draws of its masks."""

import json
import sys
from pathlib import Path

import pytest
from mdlm_kit.cli.main import main
from mdlm_kit.mdlm.diffusion import elbo_bound
from mdlm_kit.mdlm.sampling import load_inference
from mdlm_kit.text.data import PackedData

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import bound_draws


def test_each_seed_under_each_draw(tmp_path, tiny_config, capsys):
    sweep = tmp_path / "sw"
    args = ["sweep", "--config", tiny_config, "--output-dir", sweep, "--objectives", "mdlm", "--seeds", "0,1"]
    args += ["--max-steps", "4", "--levels", "2", "--set", "training.min_lr=-1.0", "--no-progress"]
    assert main([str(a) for a in args]) == 0
    runs = bound_draws.seed_runs(sweep, "mdlm", 4)
    assert runs == {s: sweep / "runs" / f"mdlm_seed{s}_frac1" / "inference" for s in (0, 1)}
    assert bound_draws.seed_runs(sweep, "mdlm", 8) == {}  # no run was trained 8 steps
    out = tmp_path / "draws.json"
    bound_draws.main([str(sweep), "--steps", "4", "--draws", "2", "--levels", "2", "--output", str(out)])
    got = json.loads(out.read_text())
    # by hand: seed 1's run under draw 1 is lesson 07's bound with mask seed 1
    data = PackedData(sweep / "data")
    batches = data.batches("val", 16)
    model = load_inference(runs[1], "cpu")[0]
    want = elbo_bound(model, batches, model.config.mask_token_id, n_levels=2, seed=1)["nats_per_token"]
    assert got["nats_per_token"]["1"][1] == round(want, 5)
    v = got["nats_per_token"]
    assert got["seed_spread_by_draw"] == [round(abs(v["0"][d] - v["1"][d]), 5) for d in (0, 1)]
    assert got["draw_spread_by_seed"] == {s: round(abs(v[s][0] - v[s][1]), 5) for s in ("0", "1")}
    with pytest.raises(SystemExit, match="fewer than two mdlm runs at 8 steps"):
        bound_draws.main([str(sweep), "--steps", "8", "--output", str(out)])
    with pytest.raises(SystemExit, match="only mdlm has masks to draw"):
        bound_draws.main([str(sweep), "--objective", "ar", "--output", str(out)])
