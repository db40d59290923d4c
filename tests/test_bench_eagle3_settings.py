"""`bench/eagle3_settings.py`: each arm is the recipe's train-eagle3 command plus its own flags, and a finished arm
is collected, not rerun."""

import argparse, json, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import eagle3_settings


def test_arm_command_and_done(tmp_path):
    a = argparse.Namespace(target="smollm2", features="F", output_dir=str(tmp_path), max_steps=500, eval_interval=100)
    a.steps, a.eagle3_aux = 200, "1,14,26"
    args = eagle3_settings.command(a, "x_lr", "--learning-rate=2.5e-3")
    i = args.index("--max-run-steps")
    assert args[0] == "train-eagle3" and args[i + 1] == "200"
    assert args[-4:] == ["--learning-rate", "2.5e-3", "--output-dir", str(tmp_path / "x_lr")]  # the arm's flag last
    assert args.count("--learning-rate") == 2  # argparse keeps the later one
    assert eagle3_settings.command(a, "x", "")[-2:] == ["--output-dir", str(tmp_path / "x")]
    run = tmp_path / "x"
    run.mkdir()
    assert not eagle3_settings.done(run, 200)  # no events yet
    ev = [{"event": "eval", "step": s, "tau": 1.5, "acc_by_position": [0.4]} for s in (0, 100)]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev))
    assert not eagle3_settings.done(run, 200)
    (run / "events.jsonl").write_text("".join(json.dumps(e | {"step": s}) + "\n" for e, s in zip(ev, (100, 200))))
    assert eagle3_settings.done(run, 200)
    assert [c["step"] for c in eagle3_settings.curve(run)] == [100, 200]
