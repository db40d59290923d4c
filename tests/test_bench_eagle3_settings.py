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


def _features(root: Path, sizes: list[int]) -> Path:
    "A saved-features directory (train/ with shards of `sizes` samples, eval/) in the kit's format, tiny."
    import torch
    from safetensors.torch import save_file
    from mdlm_kit.drafts.features import FEATURES_FORMAT

    train, shards, first = root / "train", [], 0
    train.mkdir(parents=True)
    for k, n in enumerate(sizes):
        t = {}
        for i in range(first, first + n):
            t[f"{i}.input_ids"] = torch.full((3,), i)
            t[f"{i}.loss_mask"] = torch.ones(3, dtype=torch.long)
            t[f"{i}.hidden_states"] = torch.full((3, 4), float(i))
        save_file(t, str(train / f"shard_{k:05d}.safetensors"))
        shards.append({"file": f"shard_{k:05d}.safetensors", "n": n, "first": first})
        first += n
    index = {"format": FEATURES_FORMAT, "layer_ids": [1], "hidden_size": 4, "n_samples": first}
    index |= {"shard_size": sizes[0], "shards": shards, "complete": True}
    (train / "index.json").write_text(json.dumps(index))
    (root / "eval").mkdir()
    return root


def test_first_shards_is_the_data_cut_short(tmp_path):
    import pytest
    from mdlm_kit.drafts.features import HiddenStates

    src = _features(tmp_path / "feats", [2, 2, 1])
    dst = eagle3_settings.first_shards(str(src), 2, tmp_path / "out")
    ds = HiddenStates(dst / "train")
    assert len(ds) == 4 and ds[3]["input_ids"].tolist() == [3, 3, 3]  # the first two shards, the same samples
    with pytest.raises(IndexError):
        ds[4]
    assert ds.index["data_key"] == ":first2"  # not the whole set's key
    assert (dst / "eval").resolve() == (src / "eval").resolve()  # the same held-out features
    assert eagle3_settings.first_shards(str(src), 2, tmp_path / "out") == dst  # again: the same directory, no error
    for n in (0, 4):
        with pytest.raises(SystemExit, match="--first-shards must be 1..3"):
            eagle3_settings.first_shards(str(src), n, tmp_path / "out")
