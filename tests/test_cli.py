"The command line end to end on a tiny config: train, resume, sample, eval, and every bad input with its message."

import json, shutil, subprocess, sys
from pathlib import Path
import pytest
import torch
from conftest import read_events, tree_digest
from mdlm_kit.cli.main import main


def run(args, capsys):
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def trained(tmp_path, tiny_config, capsys):
    out = tmp_path / "run"
    rc, _, err = run(["train", "--config", tiny_config, "--output-dir", out, "--no-progress"], capsys)
    assert rc == 0, err
    return out


def test_run_directory_layout(trained):
    assert (trained / "config.toml").is_file()
    assert sorted(p.name for p in (trained / "checkpoints").iterdir()) == [
        "latest",
        "step_00000004.pt",
        "step_00000006.pt",
    ]
    assert (trained / "checkpoints" / "latest").read_text().strip() == "step_00000006.pt"
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in (trained / "inference").iterdir()}
    kinds = [e["event"] for e in read_events(trained)]
    assert kinds[0] == "start" and kinds[-1] == "complete"
    assert [e["step"] for e in read_events(trained, "train")] == [1, 2, 3, 4, 5, 6]
    assert [e["step"] for e in read_events(trained, "validation")] == [3, 6]
    cfg = json.loads((trained / "inference" / "config.json").read_text())
    assert cfg["model_type"] == "mdlm_kit_diffusion" and cfg["vocab_size"] == 400 and cfg["mask_token_id"] == 3


def test_config_toml_reruns_the_same_experiment(trained, tmp_path, capsys):
    rc, _, err = run(
        ["train", "--config", trained / "config.toml", "--output-dir", tmp_path / "again", "--no-progress"], capsys
    )
    assert rc == 0, err
    assert [e["loss"] for e in read_events(trained, "train")] == [
        e["loss"] for e in read_events(tmp_path / "again", "train")
    ]


def test_resume_equals_uninterrupted(trained, tmp_path, tiny_config, capsys):
    part = tmp_path / "part"
    assert (
        run(["train", "--config", tiny_config, "--output-dir", part, "--max-run-steps", "3", "--no-progress"], capsys)[
            0
        ]
        == 0
    )
    assert read_events(part)[-1]["event"] == "paused"
    assert run(["train", "--config", tiny_config, "--output-dir", part, "--resume", "--no-progress"], capsys)[0] == 0
    assert [e["loss"] for e in read_events(part, "train")] == [e["loss"] for e in read_events(trained, "train")]
    assert [e["elbo_nats_per_token"] for e in read_events(part, "validation")] == [
        e["elbo_nats_per_token"] for e in read_events(trained, "validation")
    ]
    a = torch.load(trained / "checkpoints" / "step_00000006.pt", weights_only=True)
    b = torch.load(part / "checkpoints" / "step_00000006.pt", weights_only=True)
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k


def test_resume_after_crash_discards_events_past_the_checkpoint(trained, capsys):
    # simulate a crash after step 6's events but with 'latest' still at step 4
    (trained / "checkpoints" / "latest").write_text("step_00000004.pt\n")
    (trained / "checkpoints" / "step_00000006.pt").unlink()
    before = [e["loss"] for e in read_events(trained, "train")]
    assert (
        run(
            ["train", "--config", trained / "config.toml", "--output-dir", trained, "--resume", "--no-progress"], capsys
        )[0]
        == 0
    )
    assert [e["loss"] for e in read_events(trained, "train")] == before


def test_run_stopped_before_its_first_checkpoint_resumes_from_step_0(trained, tmp_path, tiny_config, capsys):
    # a crash after the start event (and data preparation) but before the first save: not a new run, and nothing to load
    crashed = tmp_path / "crashed"
    shutil.copytree(trained / "data", crashed / "data")
    (crashed / "events.jsonl").write_text((trained / "events.jsonl").read_text().splitlines()[0] + "\n")
    expect_error(capsys, ["train", "--config", tiny_config, "--output-dir", crashed], "already holds a run", "--resume")
    rc, out, err = run(["train", "--config", tiny_config, "--output-dir", crashed, "--resume", "--no-progress"], capsys)
    assert rc == 0, err
    assert "starting it again from step 0" in out
    assert [e["event"] for e in read_events(crashed)][:2] == ["start", "resume"]
    assert [e["loss"] for e in read_events(crashed, "train")] == [e["loss"] for e in read_events(trained, "train")]
    a = torch.load(trained / "checkpoints" / "step_00000006.pt", weights_only=True)["model"]
    b = torch.load(crashed / "checkpoints" / "step_00000006.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_sample_and_eval(trained, corpus_file, capsys):
    inf = trained / "inference"
    rc, out1, err = run(
        ["sample", "--checkpoint", inf, "--prompt", "The for", "--length", "12", "--steps", "6", "--seed", "3"], capsys
    )
    assert rc == 0, err
    assert out1.startswith("The for"), out1
    rc, out2, _ = run(
        ["sample", "--checkpoint", inf, "--prompt", "The for", "--length", "12", "--steps", "6", "--seed", "3"], capsys
    )
    assert out1 == out2 and "░" not in out1
    rc, out, err = run(["eval", "--checkpoint", inf, "--text", corpus_file, "--levels", "2"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    text = corpus_file.read_text()
    assert res["n_chars"] == len(text)
    assert res["bits_per_char"] == pytest.approx(
        res["elbo_nats_per_token"] * res["n_tokens"] / len(text) / 0.6931471805599453, rel=1e-4
    )
    assert 0 < res["elbo_nats_per_token"] < 10
    assert res["objective"] == "mdlm" and res["nats_per_token"] == res["elbo_nats_per_token"]
    assert 0 <= res["quadrature_error"] < 0.5


def test_eval_scores_a_packed_split_as_the_quickstart_does(trained, tmp_path, capsys):
    "`eval --data` prints what `score_split` gives on the run's validation split, and refuses another tokenizer's data."
    import shutil
    from mdlm_kit.text.data import PackedData
    from mdlm_kit.mdlm.sampling import load_inference
    from mdlm_kit.mdlm.train import score_split

    inf, data = trained / "inference", trained / "data"
    rc, out, err = run(["eval", "--checkpoint", inf, "--data", data, "--levels", "4"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    want = score_split(load_inference(inf, "cpu")[0], PackedData(data), "mdlm", n_levels=4)
    assert res["nats_per_token"] == pytest.approx(want["nats_per_token"], abs=1e-6)
    assert (res["split"], res["n_tokens"], res["n_chars"]) == ("val", want["n_tokens"], want["n_chars"])
    assert res["unigram_nats_per_token"] == pytest.approx(PackedData(data).unigram_entropy("val"), abs=1e-6)
    other = tmp_path / "other"
    shutil.copytree(data, other)
    meta = json.loads((other / "meta.json").read_text())
    (other / "meta.json").write_text(json.dumps({**meta, "tokenizer_sha256": "0" * 64}))
    expect_error(capsys, ["eval", "--checkpoint", inf, "--data", other], "packed with another tokenizer")
    with pytest.raises(SystemExit) as e:
        run(["eval", "--checkpoint", inf], capsys)
    assert e.value.code == 2 and "one of the arguments --text --data is required" in capsys.readouterr().err


def test_console_script_help(capsys):
    "The installed console script answers (one process), and each MDLM command's --help prints its flags."
    exe = Path(sys.executable).parent / "mdlm-kit"
    r = subprocess.run([str(exe), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and all(c in r.stdout for c in ("quickstart", "train", "speculate")), r.stderr
    for cmd in ["quickstart", "prepare", "train", "sample", "eval"]:
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0 and f"usage: mdlm-kit {cmd}" in capsys.readouterr().out


# ---------------------------------------------------------------- bad input: message, exit code 2, nothing lost


def expect_error(capsys, args, *needles):
    rc, out, err = run(args, capsys)
    assert rc == 2, (rc, out, err)
    for n in needles:
        assert n in err, err
    return err


def refused_resume(capsys, run_dir, setting: str, *needles, config=None):
    "`train --resume --set SETTING` in `run_dir` exits 2 naming `needles`, and leaves every file of the run as it was."
    before = tree_digest(run_dir)
    args = ["train", "--config", config or run_dir / "config.toml", "--output-dir", run_dir, "--resume"]
    expect_error(capsys, [*args, "--no-progress", "--set", setting], *needles)
    assert tree_digest(run_dir) == before


def test_existing_run_is_not_overwritten(trained, tiny_config, capsys):
    before = tree_digest(trained)
    expect_error(capsys, ["train", "--config", tiny_config, "--output-dir", trained], "already holds a run", "--resume")
    assert tree_digest(trained) == before


def test_resume_refuses_changed_model_and_optimizer(trained, capsys):
    refused_resume(capsys, trained, "model.d_model=64", "model.d_model: checkpoint 32 != now 64")
    refused_resume(capsys, trained, "training.beta2=0.9", "training.beta2")


def test_resume_refuses_other_tokenizer(trained, capsys):
    refused_resume(capsys, trained, "data.tokenizer_vocab_size=500", "data.tokenizer_vocab_size")


def test_resume_without_checkpoint(tmp_path, tiny_config, capsys):
    expect_error(
        capsys, ["train", "--config", tiny_config, "--output-dir", tmp_path / "none", "--resume"], "holds no run"
    )


def test_truncated_checkpoint(trained, capsys):
    ck = trained / "checkpoints" / "step_00000006.pt"
    ck.write_bytes(ck.read_bytes()[:1000])
    before = tree_digest(trained)
    expect_error(
        capsys, ["train", "--config", trained / "config.toml", "--output-dir", trained, "--resume"], "truncated"
    )
    assert tree_digest(trained) == before


def test_foreign_and_pickled_checkpoints(trained, capsys):
    ck = trained / "checkpoints" / "step_00000006.pt"
    torch.save({"state_dict": {"w": torch.zeros(1)}}, ck)
    expect_error(
        capsys, ["train", "--config", trained / "config.toml", "--output-dir", trained, "--resume"], "is not a mdlm_kit"
    )

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    torch.save({"format": "x", "payload": Evil()}, ck)
    err = expect_error(
        capsys, ["train", "--config", trained / "config.toml", "--output-dir", trained, "--resume"], "never unpickles"
    )
    assert "pwned" not in err


def test_unknown_and_bad_config_keys(tmp_path, tiny_config, capsys):
    def refused(config, flags, *needles):
        expect_error(capsys, ["train", "--config", config, "--output-dir", tmp_path / "r", *flags], *needles)

    refused(
        tiny_config,
        ["--set", "training.learning_rte=1"],
        "unknown config key 'training.learning_rte'",
        "did you mean 'training.learning_rate'",
    )
    bad = tmp_path / "bad.toml"
    bad.write_text(tiny_config.read_text() + "\n[optimiser]\nlr = 1\n")
    refused(bad, [], "unknown config key 'optimiser'")
    refused(tiny_config, ["--set", 'training.batch_size="4"'], "training.batch_size", "expected an integer")
    broken = tmp_path / "broken.toml"
    broken.write_text("[model\nn_layer = 1")
    refused(broken, [], "not valid TOML")
    refused(tmp_path / "missing.toml", [], "does not exist")
    assert not (tmp_path / "r").exists()


def test_mask_id_differs_from_tokenizer(tmp_path, tiny_config, capsys):
    expect_error(
        capsys,
        ["train", "--config", tiny_config, "--output-dir", tmp_path / "r", "--set", "model.mask_token_id=5"],
        "mask token id is 3",
        "model.mask_token_id = -1",
    )
    assert not (tmp_path / "r" / "events.jsonl").exists()


def test_vocab_size_differs_from_data(tmp_path, tiny_config, capsys):
    expect_error(
        capsys,
        ["train", "--config", tiny_config, "--output-dir", tmp_path / "r", "--set", "model.vocab_size=512"],
        "vocab size 400 != model vocab size 512",
    )


def test_empty_and_too_short_corpus(tmp_path, tiny_config, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    expect_error(
        capsys,
        ["train", "--config", tiny_config, "--output-dir", tmp_path / "r", "--set", f'data.corpus="{empty}"'],
        "is empty",
    )
    short = tmp_path / "short.txt"
    short.write_text("A few words only. " * 5)
    expect_error(
        capsys,
        ["train", "--config", tiny_config, "--output-dir", tmp_path / "r2", "--set", f'data.corpus="{short}"'],
        "too short",
        "smaller data.block_size",
    )
    expect_error(
        capsys, ["prepare", "--corpus", tmp_path / "nope.txt", "--output-dir", tmp_path / "d"], "does not exist"
    )


def other_tokenizer(capsys, config, out):
    "`prepare` into `out` with a 450-token tokenizer (the tiny config's is 400)."
    flags = ["--output-dir", out, "--set", "data.tokenizer_vocab_size=450"]
    assert run(["prepare", "--config", config, *flags], capsys)[0] == 0


def test_data_built_with_another_tokenizer(tmp_path, tiny_config, capsys):
    d = tmp_path / "data"
    assert run(["prepare", "--config", tiny_config, "--output-dir", d], capsys)[0] == 0
    expect_error(
        capsys,
        ["prepare", "--config", tiny_config, "--output-dir", d, "--set", "data.tokenizer_vocab_size=450"],
        "other settings",
        "tokenizer_vocab_size",
    )
    # swap in a different tokenizer behind the data's back
    other = tmp_path / "other"
    other_tokenizer(capsys, tiny_config, other)
    shutil.rmtree(d / "tokenizer")
    shutil.copytree(other / "tokenizer", d / "tokenizer")
    expect_error(
        capsys,
        ["train", "--config", tiny_config, "--output-dir", tmp_path / "r", "--set", f'data.data_dir="{d}"'],
        "not the one the data was packed with",
    )


def test_missing_tokenizer_in_checkpoint(trained, capsys):
    (trained / "inference" / "tokenizer.json").unlink()
    (trained / "inference" / "tokenizer_config.json").unlink()
    expect_error(capsys, ["sample", "--checkpoint", trained / "inference"], "no tokenizer")


def test_wrong_tokenizer_in_checkpoint(trained, tmp_path, tiny_config, capsys):
    other = tmp_path / "other"
    other_tokenizer(capsys, tiny_config, other)
    for f in (other / "tokenizer").iterdir():
        shutil.copy(f, trained / "inference" / f.name)
    expect_error(capsys, ["sample", "--checkpoint", trained / "inference"], "not the one the model was trained with")


def test_truncated_inference_weights(trained, capsys):
    w = trained / "inference" / "model.safetensors"
    w.write_bytes(w.read_bytes()[:100])
    expect_error(capsys, ["sample", "--checkpoint", trained / "inference"], "cannot be read as safetensors")


def test_fp16_on_cpu_and_missing_device(tmp_path, tiny_config, capsys):
    expect_error(
        capsys, ["train", "--config", tiny_config, "--output-dir", tmp_path / "r", "--precision", "fp16"], "refused"
    )
    if not torch.cuda.is_available():
        expect_error(
            capsys,
            ["train", "--config", tiny_config, "--output-dir", tmp_path / "r", "--device", "cuda"],
            "no CUDA GPU",
        )
    assert not (tmp_path / "r").exists()


def test_sample_bad_lengths(trained, capsys):
    expect_error(
        capsys, ["sample", "--checkpoint", trained / "inference", "--length", "100"], "exceeds the model's context"
    )
    expect_error(
        capsys,
        [
            "sample",
            "--checkpoint",
            trained / "inference",
            "--sampler",
            "blocks",
            "--length",
            "10",
            "--block-length",
            "4",
        ],
        "multiple of block_length",
    )


def test_resume_refuses_changed_learning_rate(tmp_path, tiny_config, capsys):
    out = tmp_path / "r"
    assert (
        run(["train", "--config", tiny_config, "--output-dir", out, "--max-run-steps", "2", "--no-progress"], capsys)[0]
        == 0
    )
    refused_resume(capsys, out, "training.learning_rate=0.1", "training.learning_rate: checkpoint 0.003 != now 0.1")


def _poisoned_resume(out, tiny_config, skip):
    from mdlm_kit.core.config import load_config, apply_overrides
    from mdlm_kit.mdlm.train import Trainer

    cfg = apply_overrides(load_config(tiny_config), [f"training.skip_nonfinite={'true' if skip else 'false'}"])
    tr = Trainer(cfg, out, resume=True, progress=False, log=lambda *a: None)
    with torch.no_grad():
        tr.model.norm.weight.fill_(float("nan"))
    return tr


def test_nonfinite_loss_stops_and_keeps_checkpoint(tmp_path, tiny_config, capsys):
    from mdlm_kit.mdlm.train import TrainingError

    out = tmp_path / "r"
    assert (
        run(["train", "--config", tiny_config, "--output-dir", out, "--max-run-steps", "2", "--no-progress"], capsys)[0]
        == 0
    )
    before = tree_digest(out / "checkpoints")
    tr = _poisoned_resume(out, tiny_config, skip=False)
    with pytest.raises(TrainingError, match="loss became nan at step 2.*step_00000002.pt"):
        tr.run()
    assert tree_digest(out / "checkpoints") == before


def test_nonfinite_loss_skipped_when_asked(tmp_path, tiny_config, capsys):
    out = tmp_path / "r"
    assert (
        run(["train", "--config", tiny_config, "--output-dir", out, "--max-run-steps", "2", "--no-progress"], capsys)[0]
        == 0
    )
    tr = _poisoned_resume(out, tiny_config, skip=True)
    tr.max_run_steps = 2
    tr.run()
    assert [e["step"] for e in read_events(out, "skipped_step")] == [2, 3]
    assert tr.step == 4


@pytest.mark.slow
def test_compiled_training_matches_eager(trained, tmp_path, tiny_config, capsys):
    # training.compile runs the same steps through torch.compile (fused kernels: equal up to float rounding); the run's
    # files stay those of the plain module, so a compiled run resumes uncompiled and back
    out = tmp_path / "compiled"
    rc, _, err = run(
        [
            "train",
            "--config",
            tiny_config,
            "--output-dir",
            out,
            "--max-run-steps",
            "3",
            "--no-progress",
            "--set",
            "training.compile=true",
        ],
        capsys,
    )
    assert rc == 0, err
    assert run(["train", "--config", tiny_config, "--output-dir", out, "--resume", "--no-progress"], capsys)[0] == 0
    a, b = [e["loss"] for e in read_events(trained, "train")], [e["loss"] for e in read_events(out, "train")]
    assert len(a) == len(b) == 6 and b == pytest.approx(a, rel=1e-3), (a, b)
    wa = torch.load(trained / "checkpoints" / "step_00000006.pt", weights_only=True)["model"]
    wb = torch.load(out / "checkpoints" / "step_00000006.pt", weights_only=True)["model"]
    assert wa.keys() == wb.keys() and all(torch.allclose(wa[k], wb[k], atol=1e-4) for k in wa)


def test_ar_baseline_trains_resumes_samples_and_scores(tmp_path, tiny_config, corpus_file, capsys):
    "The AR objective goes through the same trainer: exact resume, left-to-right samples, an exact NLL from `eval`."
    ar = ["--set", 'training.objective="ar"', "--no-progress"]
    full, part = tmp_path / "ar_full", tmp_path / "ar_part"
    assert run(["train", "--config", tiny_config, "--output-dir", full, *ar], capsys)[0] == 0
    assert run(["train", "--config", tiny_config, "--output-dir", part, "--max-run-steps", "3", *ar], capsys)[0] == 0
    assert run(["train", "--config", tiny_config, "--output-dir", part, "--resume", *ar], capsys)[0] == 0
    assert [e["loss"] for e in read_events(part, "train")] == [e["loss"] for e in read_events(full, "train")]
    vals = read_events(full, "validation")
    assert "next_token_acc" in vals[0] and "elbo_nats_per_token" not in vals[0]
    a = torch.load(full / "checkpoints" / "step_00000006.pt", weights_only=True)["model"]
    b = torch.load(part / "checkpoints" / "step_00000006.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    inf = full / "inference"
    assert json.loads((inf / "config.json").read_text())["objective"] == "ar"
    rc, out, err = run(
        ["sample", "--checkpoint", inf, "--prompt", "The for", "--length", "6", "--temperature", "0"], capsys
    )
    assert rc == 0, err
    assert out.startswith("The for") and "░" not in out, out
    rc, out, err = run(["eval", "--checkpoint", inf, "--text", corpus_file], capsys)
    assert rc == 0, err
    res = json.loads(out)
    assert res["objective"] == "ar" and "quadrature_error" not in res
    text = corpus_file.read_text()
    assert res["bits_per_char"] == pytest.approx(
        res["nats_per_token"] * res["n_tokens"] / len(text) / 0.6931471805599453
    )
    assert 1 < res["nats_per_token"] < 5.99  # learned something: below the uniform ln(400) = 5.99


def test_resume_refuses_another_objective(trained, tiny_config, capsys):
    refused_resume(capsys, trained, 'training.objective="ar"', "training.objective", config=tiny_config)


def test_resume_with_more_steps_states_the_changed_schedule(trained, tiny_config, capsys):
    rc, out, err = run(
        [
            "train",
            "--config",
            tiny_config,
            "--output-dir",
            trained,
            "--resume",
            "--no-progress",
            "--set",
            "training.max_steps=8",
        ],
        capsys,
    )
    assert rc == 0, err
    assert "training.max_steps changed from 6 to 8" in out
    assert [e["note"] for e in read_events(trained, "schedule_changed")][0].startswith("training.max_steps changed")


def test_corpus_from_a_saved_datasets_directory(tmp_path, corpus_file, capsys):
    "The `datasets` path (what hf:NAME uses after download) reads a saved dataset, its splits and its text column."
    datasets = pytest.importorskip("datasets", reason="pip install 'mdlm-kit[hf]'")
    from mdlm_kit.text.data import read_corpus, DataError

    text = corpus_file.read_text().split("\n\n")
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict({"body": text, "n": list(range(len(text)))})}
    ).save_to_disk(str(tmp_path / "ds"))
    assert read_corpus(str(tmp_path / "ds"), text_field="body") == text
    with pytest.raises(DataError, match="no column 'text'"):
        read_corpus(str(tmp_path / "ds"))
    rc, out, err = run(
        [
            "prepare",
            "--output-dir",
            tmp_path / "packed",
            "--corpus",
            tmp_path / "ds",
            "--set",
            'data.text_field="body"',
            "--set",
            "data.tokenizer_vocab_size=400",
            "--set",
            "data.block_size=32",
            "--set",
            "model.max_seq_len=32",
        ],
        capsys,
    )
    assert rc == 0, err
    assert json.loads((tmp_path / "packed" / "meta.json").read_text())["n_documents"] == len(
        [t for t in text if t.strip()]
    )


def test_make_chat_data_with_self_written_prompts(tmp_path, capsys):
    "Magpie prompts from the target take turns with the embedded ones; a rerun adds nothing and keeps them."
    from conftest import save_tiny_target_and_chat

    save_tiny_target_and_chat(tmp_path)
    out = tmp_path / "chat" / "all.jsonl"
    argv = ["make-chat-data", "--target", str(tmp_path / "t"), "--num-prompts", "3", "--self-prompts", "2"]
    argv += ["--batch-size", "16", "--max-new-tokens", "4", "--output", str(out), "--no-progress"]
    main(argv)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"][0] for r in rows] == ["p", "s", "p", "s", "p"]
    own = [json.loads(line) for line in (tmp_path / "chat" / "all.self_prompts.jsonl").read_text().splitlines()]
    written = [m for b in own for m in b["messages"]]
    assert rows[1]["conversations"][0]["content"] == written[0]
    assert rows[3]["conversations"][0]["content"] == next(m for m in written if m != written[0])
    assert [m["role"] for m in rows[1]["conversations"]] == ["user", "assistant"]
    before = (tmp_path / "chat" / "all.self_prompts.jsonl").read_text()
    capsys.readouterr()
    main(argv)
    assert "wrote 0 new conversations" in capsys.readouterr().out
    assert (tmp_path / "chat" / "all.self_prompts.jsonl").read_text() == before


def test_seed_spellings_and_one_device_refusals(tmp_path, tiny_config, capsys, monkeypatch):
    """The seeds' `--precision bfloat16` is the kit's bf16; `--tp-size 1` is accepted and a larger one refused with
    SpecForge named; a torchrun launch of several processes is refused by the drafter trainers (sharded drafter
    training is SpecForge's) and by the quickstart, before anything is written (`mdlm-kit train` runs it: test_ddp)."""
    from mdlm_kit.cli.main import build_config, make_parser

    args = make_parser().parse_args(
        ["train", "--config", str(tiny_config), "--output-dir", "x", "--precision", "bfloat16"]
    )
    assert build_config(args).precision == "bfloat16"  # validated, and resolve_precision reads it as bf16
    for algo in ("dflash", "eagle3"):
        out = tmp_path / algo
        tp = make_parser().parse_args([f"train-{algo}", "--output-dir", str(out), "--tp-size", "1"])
        assert tp.tp_size == 1
        expect_error(capsys, [f"train-{algo}", "--output-dir", out, "--tp-size", "2"], "use SpecForge")
        monkeypatch.setenv("WORLD_SIZE", "2")
        expect_error(capsys, [f"train-{algo}", "--output-dir", out], "started as one of 2 processes (torchrun)")
        monkeypatch.delenv("WORLD_SIZE")
        assert not out.exists()
    monkeypatch.setenv("WORLD_SIZE", "2")
    expect_error(capsys, ["quickstart", "--output-dir", tmp_path / "r"], "under torchrun use `mdlm-kit train`")
    assert not (tmp_path / "r").exists()


def test_a_setting_flag_reaches_the_config_after_the_file_and_set(tiny_config):
    """`mdlm-kit train --learning-rate X` is `training.learning_rate` (one flag per field, issue 43): a typed value,
    applied after `--set`; a flag not given leaves the config file's value, and a bad value is refused by name."""
    from mdlm_kit.cli.main import build_config, make_parser
    from mdlm_kit.core.config import ConfigError

    base = ["train", "--config", str(tiny_config), "--output-dir", "x"]
    cfg = build_config(
        make_parser().parse_args(
            base + ["--set", "training.learning_rate=5e-4", "--learning-rate", "1e-3", "--n-layer", "2"]
        )
    )
    assert (cfg.training.learning_rate, cfg.model.n_layer, cfg.model.n_head) == (1e-3, 2, 2)  # n_head: the file's
    cfg = build_config(make_parser().parse_args(base + ["--no-qk-norm", "--max-steps", "60", "--warmup-steps", "5"]))
    assert (cfg.model.qk_norm, cfg.training.max_steps, cfg.training.warmup_steps) == (False, 60, 5)
    with pytest.raises(ConfigError, match="model.n_head"):
        build_config(make_parser().parse_args(base + ["--n-head", "3"]))  # 3 does not divide d_model 32


def _flag_helps() -> dict:
    "flag -> {its help without the default: [the subcommands that say it so]}, over every subcommand's parser."
    import argparse

    from mdlm_kit.cli.main import make_parser

    sub = next(a for a in make_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {}
    for name, p in sub.choices.items():
        for a in p._actions:
            for flag in (f for f in a.option_strings if f.startswith("--") and a.help):
                helps.setdefault(flag, {}).setdefault(a.help.split(" (default")[0], []).append(name)
    return helps


def test_a_flag_shared_by_commands_has_one_help():
    "`--device`, `--no-progress` and `--max-grad-norm` mean the same in every command that has them: one help each."
    from mdlm_kit.core.config import DEVICE_HELP

    helps = _flag_helps()
    assert [len(helps[f]) for f in ("--device", "--no-progress", "--max-grad-norm")] == [1, 1, 1], helps
    assert list(helps["--device"]) == [DEVICE_HELP]
    assert sorted(helps["--device"][DEVICE_HELP]) == sorted(
        ["quickstart", "train", "sweep", "sample", "eval", "playground", "make-chat-data", "hidden-states", "speculate"]
        + ["adapt", "train-dflash", "train-eagle3"]  # every command that computes (prepare only packs text)
    )


# flags spelt alike whose meaning differs by command, and why; every other flag shared by commands has one help
DIFFERENT_MEANINGS = {
    "--baseline": "quickstart trains an AR twin; speculate also times plain sampling",
    "--batch-size": "each command's unit: sequences, prompts, samples or conversations",
    "--block-length": "a bd3lm run's block vs the blocks sampler's",
    "--block-size": "training sequence, feature cut, adapted block or DFlash block",
    "--checkpoint": "sample also takes adapters; the playground has a default",
    "--config": "an MDLM config vs adapt's settings file",
    "--data": "a packed split, a chat JSONL, or self-answered conversations",
    "--draft": "the playground's drafter needs --target",
    "--learning-rate": "adapt names its schedule (cosine)",
    "--levels": "one bound vs a sweep's bounds",
    "--mask-token-id": "the MDLM's mask id vs DFlash's (auto: a drafter-owned row)",
    "--max-steps": "the sweep's budgets; the drafters count from epochs at 0",
    "--num-feature-layers": "which layers to save vs which feed the drafter",
    "--num-prompts": "speculate's embedded set defaults to 20",
    "--output": "a JSONL, a feature directory or a JSON of results",
    "--output-dir": "each command's directory holds other files",
    "--precision": "training precision vs decoding precision (and adapt has no fp16)",
    "--prompts": "each command's prompt sets",
    "--seed": "what each command seeds",
    "--target": "the playground's needs --draft",
    "--temperature": "the MDLM sampler's vs the target's sampling (speculate checks losslessness at 0)",
    "--top-k": "the MDLM sampler's vs the target's sampling",
    "--warmup-steps": "the drafters' replaces --warmup-ratio",
}


def test_a_flag_that_means_the_same_reads_the_same_in_every_command():
    """A flag spelt alike in several commands has one help (a settings class shares another's with `help_of`), unless
    it is listed above with why its meaning differs. A new wording of a shared flag, or a listed flag whose wordings
    have become one, fails here."""
    helps = _flag_helps()
    several = {f for f, h in helps.items() if len(h) > 1}
    assert several == set(DIFFERENT_MEANINGS), {f: helps[f] for f in several ^ set(DIFFERENT_MEANINGS) if f in helps}
    shared = {f: next(iter(h.values())) for f, h in helps.items() if len(h) == 1 and len(next(iter(h.values()))) > 1}
    unified = {"--log-interval", "--skip-nonfinite", "--max-length", "--is-preformatted", "--max-new-tokens"}
    assert unified <= set(shared)  # each had two wordings before help_of
    assert sorted(shared["--log-interval"]) == sorted(
        ["quickstart", "train", "sweep", "adapt", "train-dflash", "train-eagle3"]
    )


def test_a_weight_average_is_what_is_scored_exported_and_resumed(trained, tmp_path, corpus_file, capsys):
    "training.ema_decay: training is unchanged, evaluation and the export use the average, and a resume continues it."
    from conftest import tiny_toml
    from mdlm_kit.mdlm.sampling import load_inference

    cfg = tmp_path / "ema.toml"
    cfg.write_text(tiny_toml(corpus_file, "training.ema_decay=0.5"))
    full, part = tmp_path / "full", tmp_path / "part"
    assert run(["train", "--config", cfg, "--output-dir", full, "--no-progress"], capsys)[0] == 0
    assert [e["loss"] for e in read_events(full, "train")] == [e["loss"] for e in read_events(trained, "train")]
    scored = [e["elbo_nats_per_token"] for e in read_events(full, "validation")]
    assert scored != [e["elbo_nats_per_token"] for e in read_events(trained, "validation")]  # another set of weights
    ckpt = torch.load(full / "checkpoints" / "step_00000006.pt", weights_only=True)
    model, _ = load_inference(full / "inference", "cpu")  # exported in bf16
    params = [p for p in model.parameters() if p.is_floating_point()]
    assert ckpt["ema"]["decay"] == 0.5 and len(ckpt["ema"]["avg"]) == len(params)
    bf16 = lambda t: t.to(torch.bfloat16)
    assert all(torch.equal(bf16(p), bf16(a)) for p, a in zip(params, ckpt["ema"]["avg"]))  # the export is the average
    last = dict(model.named_parameters())
    assert any(not torch.equal(bf16(last[k]), bf16(v)) for k, v in ckpt["model"].items() if k in last)
    args = ["train", "--config", cfg, "--output-dir", part, "--no-progress"]
    assert run([*args, "--max-run-steps", "3"], capsys)[0] == 0
    assert run([*args, "--resume"], capsys)[0] == 0
    again = torch.load(part / "checkpoints" / "step_00000006.pt", weights_only=True)
    assert all(torch.equal(a, b) for a, b in zip(ckpt["ema"]["avg"], again["ema"]["avg"]))
    assert [e["elbo_nats_per_token"] for e in read_events(part, "validation")] == scored
    refused_resume(capsys, trained, "training.ema_decay=0.5", "training.ema_decay")  # a run without one
    expect_error(capsys, [*args, "--set", "training.ema_decay=1"], "training.ema_decay", "must be in [0, 1)")
