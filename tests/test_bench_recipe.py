"""The timed drafter recipe (`bench/drafter_recipe.py`) end to end on a tiny target: every stage runs, is timed,
and the summary counts the data and the training it did."""

import argparse, json, sys
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import drafter_recipe


@pytest.mark.slow
def test_recipe_runs_every_stage_and_summarises_it(tmp_path, monkeypatch, capsys):
    from mdlm_kit.drafts.targets import tiny_target

    tgt = tiny_target("qwen3", num_layers=5)
    tgt.model.save_pretrained(tmp_path / "target")
    tgt.tokenizer.save_pretrained(tmp_path / "target")
    run, out = tmp_path / "run", tmp_path / "recipe.json"
    argv = ["drafter_recipe.py", "--target", str(tmp_path / "target"), "--output-dir", str(run)]
    argv += [
        "--num-prompts",
        "16",
        "--self-prompts",
        "0",
        "--eval-prompts",
        "6",
        "--max-new-tokens",
        "24",
        "--gen-batch-size",
        "8",
    ]
    argv += ["--temperature", "1.0"]  # a random tiny target answers with EOS at once when greedy
    argv += ["--block-size", "4", "--eagle3-layers", "1,2,3,4", "--target-layers", "5"]
    argv += ["--dflash-steps", "3", "--eagle3-steps", "2"]
    argv += ["--dflash-eval", "3", "--eagle3-eval", "2", "--output", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    drafter_recipe.main()
    s = json.loads(out.read_text())
    assert set(s["stages"]) == {"data", "features", "training"}
    for stage in s["stages"].values():  # every stage ran child processes that used the CPU
        assert stage["wall_s"] > 0 and stage["cpu_s"] > 0
    assert len((run / "chat/all.jsonl").read_text().splitlines()) == 16
    assert len((run / "chat/eval.jsonl").read_text().splitlines()) == 6
    index = json.loads((run / "feats/train/index.json").read_text())
    assert index["layer_ids"] == [1, 2, 3, 4]  # one pass: DFlash's 1,1,2,2,2 and EAGLE-3's 1,2,3,4
    kept = index["n_samples"]
    assert s["train_data"]["conversations"] == kept and 0 < kept <= 10
    assert s["train_data"]["supervised_tokens"] < s["train_data"]["tokens"]
    assert s["dflash"]["steps"] == 3 and s["eagle3"]["steps"] == 2
    for name in ("dflash", "eagle3"):  # both trainers ran in the recipe's precision (bf16 on a CPU with native bf16)
        config = json.loads((run / name / "train_config.json").read_text())
        assert config["precision"] == drafter_recipe.train_precision("auto")
    assert [c["step"] for c in s["eagle3"]["curve"]] == [0, 2]
    for c in s["eagle3"]["curve"]:  # EAGLE-3 also reports tau as decoding walks it (lesson 18); DFlash cannot
        assert 1 <= c["tau_decode"] <= 1 + 4 and "tau_decode" not in s["dflash"]["curve"][0]
    # --collect rebuilds the same summary from the finished run
    monkeypatch.setattr(sys, "argv", ["drafter_recipe.py", "--collect", str(run), "--output", str(tmp_path / "c.json")])
    drafter_recipe.main()
    again = json.loads((tmp_path / "c.json").read_text())
    assert {k: again[k] for k in ("stages", "train_data", "dflash", "eagle3")} == {
        k: s[k] for k in ("stages", "train_data", "dflash", "eagle3")
    }


def test_layers_come_from_the_target_config(tmp_path):
    "Without --target-layers and --eagle3-layers the recipe reads the layer count from the target's config."
    from mdlm_kit.drafts.targets import tiny_target

    tiny_target("qwen3", num_layers=6).model.save_pretrained(tmp_path / "t")
    flags = argparse.Namespace(target=str(tmp_path / "t"), target_layers=0, eagle3_layers="")
    assert drafter_recipe.target_layer_count(flags.target) == 6
    # EAGLE-3: layers 1, 6 // 2 - 1, 6 - 4 and the last; DFlash: 5 spread between 1 and 6 - 3
    assert drafter_recipe.feature_layers(flags) == ([1, 2, 2, 5], [1, 2, 3, 5])
    flags.eagle3_layers, flags.target_layers = "1,2,3,4", 5  # the flags win
    assert drafter_recipe.feature_layers(flags) == ([1, 2, 3, 4], [1, 2, 3, 4])


def test_the_trainers_precision(monkeypatch):
    "`--train-precision auto` is bf16 where the CPU has native bf16, else the trainers' own auto; a named one is kept."
    import torch
    import mdlm_kit.core.device as device

    # None: cannot be told (not Linux); with a GPU the trainers train there, and their own auto picks
    for cuda, native, auto in (
        (False, True, "bf16"),
        (False, False, "auto"),
        (False, None, "auto"),
        (True, True, "auto"),
    ):
        monkeypatch.setattr(device, "cpu_supports_bf16", lambda native=native: native)
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        assert drafter_recipe.train_precision("auto") == auto
        assert drafter_recipe.train_precision("fp32") == "fp32"
    f = {k: "X" for k in ("target", "run", "feats", "block_size", "dflash_steps", "dflash_eval", "eagle3_aux")}
    f |= {"eagle3_steps": "X", "eagle3_eval": "X", "train_precision": "bf16"}
    for cmd in (drafter_recipe.DFLASH, drafter_recipe.EAGLE3):  # both trainers get it
        assert "--precision bf16" in cmd.format(**f)


def test_a_finished_stage_is_kept(tmp_path, capsys):
    "The same command started again goes on from the first stage it had not finished."
    ran = []
    drafter_recipe._stage("data", tmp_path, lambda: ran.append("data"))
    book = json.loads((tmp_path / "recipe_times.json").read_text())
    drafter_recipe._stage("data", tmp_path, lambda: ran.append("data again"))
    drafter_recipe._stage("features", tmp_path, lambda: ran.append("features"))
    assert ran == ["data", "features"]
    again = json.loads((tmp_path / "recipe_times.json").read_text())
    assert again["data"] == book["data"] and set(again) == {"data", "features"}
    assert "data: done before" in capsys.readouterr().out
