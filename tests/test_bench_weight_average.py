"""`bench/weight_average.py`: a sweep's run trained with averages of its weights beside it, each scored as the sweep
scores a run."""

import json
import sys
from pathlib import Path

import pytest
from mdlm_kit.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import weight_average


def test_the_last_weights_and_an_average_score_as_the_sweep_scores_them(tmp_path, tiny_config):
    common = ["--config", tiny_config, "--objectives", "mdlm", "--seeds", "1", "--max-steps", "4", "--levels", "2"]
    common = [str(a) for a in common + ["--set", "training.min_lr=-1.0", "--no-progress"]]
    plain, avg = tmp_path / "plain", tmp_path / "avg"
    assert main(["sweep", *common, "--output-dir", str(plain)]) == 0
    assert main(["sweep", *common, "--output-dir", str(avg), "--set", "training.ema_decay=0.5"]) == 0
    row = lambda d: json.loads((d / "sweep.json").read_text())["rows"][0]["nats_per_token"]
    out, runs = tmp_path / "wa.json", tmp_path / "runs"
    args = [str(plain / "data"), "--config", str(tiny_config), "--set", "training.min_lr=-1.0", "--seeds", "1"]
    args += ["--decays", "0.5,0.9", "--max-steps", "4", "--levels", "2", "--output-dir", str(runs)]
    weight_average.main(args + ["--output", str(out)])
    r = json.loads(out.read_text())["rows"]
    assert [(x["seed"], x["steps"]) for x in r] == [(1, 4)]
    got = r[0]["nats_per_token"]
    assert got["last"] == row(plain)  # the sweep's own run, its last weights
    assert got["0.5"] == row(avg)  # the sweep's run with training.ema_decay=0.5, which scores the average
    assert got["0.9"] != got["0.5"] != got["last"]
    with pytest.raises(SystemExit, match="not a packed data directory"):
        weight_average.main([str(tmp_path), "--output-dir", str(runs), "--output", str(out)])
