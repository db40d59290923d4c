"""The bad-input suite: every case goes through the `mdlm-kit` command line and must end with exit code 2, a message
that names the problem, and every existing file in the workspace (a trained run, chat data, features, a drafter)
byte-for-byte unchanged."""

import json, os, pickle, shutil
from pathlib import Path
import pytest
from conftest import tiny_toml, tree_digest
from mdlm_kit.cli.main import main


@pytest.fixture(scope="module")
def ws(tmp_path_factory, corpus_file):
    "A workspace holding the outputs a user would not want to lose."
    from mdlm_kit.drafts.targets import tiny_target
    from mdlm_kit.drafts.dflash import DFlashConfig, DFlashDraftModel
    from mdlm_kit.drafts.chat_data import topics_chat

    w = tmp_path_factory.mktemp("ws")
    (w / "tiny.toml").write_text(tiny_toml(corpus_file))
    assert main(["train", "--config", str(w / "tiny.toml"), "--output-dir", str(w / "run"), "--no-progress"]) == 0
    tgt = tiny_target("qwen3", num_layers=5)
    tgt.model.save_pretrained(w / "target")
    tgt.tokenizer.save_pretrained(w / "target")
    topics_chat(w / "chat.jsonl", n=6)
    assert (
        main(
            [
                "hidden-states",
                "--target",
                str(w / "target"),
                "--data",
                str(w / "chat.jsonl"),
                "--output",
                str(w / "feats"),
                "--layers",
                "1,3",
                "--dtype",
                "fp32",
                "--device",
                "cpu",
                "--no-progress",
            ]
        )
        == 0
    )
    DFlashDraftModel(
        DFlashConfig.from_target(tgt.config, mask_token_id=0, block_size=4, num_feature_layers=2)
    ).save_pretrained(w / "draft")
    (w / "prompts.jsonl").write_text(json.dumps({"turns": ["hello"]}) + "\n")
    (w / "notes.txt").write_text("keep me\n")
    return w


def _write(path: Path, content) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    return str(path)


def _sweep_record(w) -> dict:
    "What `mdlm-kit sweep --config tiny.toml` saves before its first row."
    from mdlm_kit.core.config import load_config, to_dict

    return {
        "command": "mdlm-kit sweep --config tiny.toml",
        "config": to_dict(load_config(f"{w}/tiny.toml")),
        "rows": [],
    }


class Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/mdlm_kit_pwned",))


def _drafter(w, extra, cmd="train-dflash"):
    return [
        cmd,
        "--target-model-path",
        f"{w}/target",
        "--output-dir",
        f"{w}/new_run",
        "--device",
        "cpu",
        "--no-progress",
        *extra,
    ]


def _speculate(w, *flags):
    "`mdlm-kit speculate` with the workspace's target and DFlash drafter, then `flags`."
    return ["speculate", "--target", f"{w}/target", "--draft", f"{w}/draft", *flags]


# (case id, function(ws, bad_dir) -> argv, expected message fragment)
CASES = [
    # sweeps: the grid is read before anything is written
    (
        "sweep-bad-objective",
        lambda w, b: ["sweep", "--config", f"{w}/tiny.toml", "--output-dir", f"{b}/sw", "--objectives", "ar,bd3lm:0"],
        "is not ar, mdlm or bd3lm:B",
    ),
    (
        "sweep-bad-budgets",
        lambda w, b: ["sweep", "--config", f"{w}/tiny.toml", "--output-dir", f"{b}/sw", "--max-steps", "300,many"],
        "--max-steps takes comma-separated values",
    ),
    (  # a sweep.json of other settings: its rows would sit beside rows that do not compare with them
        "sweep-other-settings",
        lambda w, b: [
            "sweep",
            "--config",
            f"{w}/tiny.toml",
            "--learning-rate",
            "0.5",
            "--output-dir",
            Path(_write(Path(b) / "sw" / "sweep.json", json.dumps(_sweep_record(w)))).parent,
        ],
        "training.learning_rate: sweep 0.003 != now 0.5",
    ),
    # configs
    (
        "config-missing",
        lambda w, b: ["train", "--config", f"{b}/nope.toml", "--output-dir", f"{w}/x"],
        "nope.toml' does not exist",
    ),
    (
        "config-unknown-key",
        lambda w, b: ["train", "--config", _write(b / "c.toml", '[model]\nn_layers = 2\n'), "--output-dir", f"{w}/x"],
        "n_layers",
    ),
    (
        "config-wrong-type",
        lambda w, b: [
            "train",
            "--config",
            _write(b / "c.toml", '[model]\nn_layer = "four"\n'),
            "--output-dir",
            f"{w}/x",
        ],
        "n_layer",
    ),
    (
        "config-not-toml",
        lambda w, b: ["train", "--config", _write(b / "c.toml", "[model\nn_layer = 2\n"), "--output-dir", f"{w}/x"],
        "is not valid TOML",
    ),
    (
        "set-without-value",
        lambda w, b: [
            "train",
            "--config",
            f"{w}/tiny.toml",
            "--set",
            "training.learning_rate",
            "--output-dir",
            f"{w}/x",
        ],
        "section.key=value",
    ),
    (
        "set-unknown-key",
        lambda w, b: ["train", "--config", f"{w}/tiny.toml", "--set", "training.lr=1", "--output-dir", f"{w}/x"],
        "training.lr",
    ),
    (
        "fp16-on-cpu",
        lambda w, b: ["train", "--config", f"{w}/tiny.toml", "--precision", "fp16", "--output-dir", f"{w}/x"],
        "refused",
    ),
    (
        "unknown-device",
        lambda w, b: ["train", "--config", f"{w}/tiny.toml", "--device", "tpu", "--output-dir", f"{w}/x"],
        "'device': must be one of",
    ),
    # corpora
    (
        "corpus-missing",
        lambda w, b: [
            "train",
            "--config",
            f"{w}/tiny.toml",
            "--set",
            f"data.corpus=\"{b}/none.txt\"",
            "--output-dir",
            f"{w}/x",
        ],
        "does not exist",
    ),
    (
        "corpus-empty",
        lambda w, b: [
            "train",
            "--config",
            f"{w}/tiny.toml",
            "--set",
            "data.corpus=\"" + _write(b / "e.txt", "") + "\"",
            "--output-dir",
            f"{w}/x",
        ],
        "empty",
    ),
    (
        "corpus-not-utf8",
        lambda w, b: [
            "train",
            "--config",
            f"{w}/tiny.toml",
            "--set",
            "data.corpus=\"" + _write(b / "bin.txt", b"\xff\xfe\x00bad" * 50) + "\"",
            "--output-dir",
            f"{w}/x",
        ],
        "UTF-8",
    ),
    (
        "corpus-bad-jsonl",
        lambda w, b: [
            "train",
            "--config",
            f"{w}/tiny.toml",
            "--set",
            "data.corpus=\"" + _write(b / "c.jsonl", '{"text": "a"}\n{oops\n') + "\"",
            "--output-dir",
            f"{w}/x",
        ],
        "not valid JSON",
    ),
    (
        "corpus-jsonl-no-field",
        lambda w, b: [
            "train",
            "--config",
            f"{w}/tiny.toml",
            "--set",
            "data.corpus=\"" + _write(b / "c.jsonl", '{"body": "a"}\n') + "\"",
            "--output-dir",
            f"{w}/x",
        ],
        "text_field",
    ),
    # runs and checkpoints
    ("run-exists", lambda w, b: ["train", "--config", f"{w}/tiny.toml", "--output-dir", f"{w}/run"], "already holds"),
    (
        "resume-changed-lr",
        lambda w, b: [
            "train",
            "--config",
            f"{w}/tiny.toml",
            "--output-dir",
            f"{w}/run",
            "--resume",
            "--set",
            "training.learning_rate=0.1",
        ],
        "learning_rate",
    ),
    ("checkpoint-missing", lambda w, b: ["sample", "--checkpoint", f"{b}/none"], "none' does not exist"),
    ("checkpoint-truncated", lambda w, b: ["sample", "--checkpoint", _trunc(w, b)], "model.safetensors"),
    ("checkpoint-pickled", lambda w, b: ["sample", "--checkpoint", _pickled(w, b)], "model.safetensors"),
    ("checkpoint-foreign", lambda w, b: ["sample", "--checkpoint", f"{w}/draft"], "not an mdlm_kit diffusion model"),
    (
        "tokenizer-swapped",
        lambda w, b: ["sample", "--checkpoint", _swapped_tok(w, b)],
        "not the one the model was trained with",
    ),
    (
        "eval-text-missing",
        lambda w, b: ["eval", "--checkpoint", f"{w}/run/inference", "--text", f"{b}/none.txt"],
        "does not exist",
    ),
    # chat data
    ("chat-missing", lambda w, b: _drafter(w, ["--train-data-path", f"{b}/none.jsonl"]), "none.jsonl' does not exist"),
    (
        "chat-bad-json",
        lambda w, b: _drafter(
            w,
            [
                "--train-data-path",
                _write(
                    b / "c.jsonl",
                    json.dumps(
                        {"conversations": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
                    )
                    + '\n{oops\n',
                ),
            ],
        ),
        ":2",
    ),
    (
        "chat-unknown-role",
        lambda w, b: _drafter(
            w,
            [
                "--train-data-path",
                _write(b / "c.jsonl", json.dumps({"conversations": [{"role": "wizard", "content": "hi"}]}) + "\n"),
            ],
        ),
        "wizard",
    ),
    (
        "chat-no-assistant",
        lambda w, b: _drafter(
            w,
            [
                "--train-data-path",
                _write(b / "c.jsonl", json.dumps({"conversations": [{"role": "user", "content": "hi"}]}) + "\n"),
            ],
        ),
        "assistant",
    ),
    (
        "make-chat-prompts-missing",
        lambda w, b: [
            "make-chat-data",
            "--target",
            f"{w}/target",
            "--prompts",
            f"{b}/none.jsonl",
            "--output",
            f"{w}/chat.jsonl",
        ],
        "none.jsonl' does not exist",
    ),
    # hidden-state stores
    ("features-no-index", lambda w, b: _drafter(w, ["--train-hidden-states-path", str(_mkdir(b / "f"))]), "index.json"),
    ("features-incomplete", lambda w, b: _drafter(w, ["--train-hidden-states-path", _incomplete(w, b)]), "incomplete"),
    (
        "features-wrong-layers",
        lambda w, b: _drafter(w, ["--train-hidden-states-path", f"{w}/feats", "--num-feature-layers", "3"]),
        "--layers",
    ),
    (
        "features-target-missing",
        lambda w, b: ["hidden-states", "--target", f"{b}/none", "--data", f"{w}/chat.jsonl", "--output", f"{b}/f"],
        "is neither a model directory",
    ),
    # drafter flags
    (
        "block-size-1",
        lambda w, b: _drafter(w, ["--train-data-path", f"{w}/chat.jsonl", "--block-size", "1"]),
        "--block-size must be at least 2",
    ),
    (
        "loss-type-unknown",
        lambda w, b: _drafter(w, ["--train-data-path", f"{w}/chat.jsonl", "--loss-type", "focal"]),
        "--loss-type must be one of",
    ),
    (
        "dpace-alpha-out-of-range",
        lambda w, b: _drafter(
            w, ["--train-data-path", f"{w}/chat.jsonl", "--loss-type", "dpace", "--dpace-alpha", "2"]
        ),
        "alpha",
    ),
    (
        "attention-backend-unknown",
        lambda w, b: _drafter(w, ["--train-data-path", f"{w}/chat.jsonl", "--attention-backend", "magic"]),
        "--attention-backend must be one of",
    ),
    (
        "eagle3-draft-vocab-too-big",
        lambda w, b: _drafter(w, ["--train-data-path", f"{w}/chat.jsonl", "--draft-vocab-size", "-5"], "train-eagle3"),
        "--draft-vocab-size must be",
    ),
    (
        "eagle3-ttt-length-0",
        lambda w, b: _drafter(w, ["--train-data-path", f"{w}/chat.jsonl", "--ttt-length", "0"], "train-eagle3"),
        "--ttt-length must be at least 1",
    ),
    (
        "drafter-run-exists",
        lambda w, b: [
            "train-dflash",
            "--target-model-path",
            f"{w}/target",
            "--train-data-path",
            f"{w}/chat.jsonl",
            "--output-dir",
            f"{w}/run",
            "--device",
            "cpu",
        ],
        "already",
    ),
    # speculative decoding
    (
        "speculate-not-a-drafter",
        lambda w, b: [
            "speculate",
            "--target",
            f"{w}/target",
            "--draft",
            f"{w}/run/inference",
            "--prompts",
            f"{w}/prompts.jsonl",
        ],
        "drafter (no matching config.json)",
    ),
    (
        "speculate-zero-draft-tokens",
        lambda w, b: _speculate(w, "--num-draft-tokens", "0"),
        "--num-draft-tokens must be at least 1",
    ),
    (
        "speculate-negative-lookup-branch",
        lambda w, b: _speculate(w, "--lookup-branch", "-1"),
        "--lookup-branch must be 0 (none) or more, not -1",
    ),
    (
        "speculate-runner-up-one",
        lambda w, b: _speculate(w, "--runner-up", "1"),
        "--runner-up must be in [0, 1), not 1.0",
    ),
    (
        "speculate-lookup-store-without-branch",
        lambda w, b: _speculate(w, "--lookup-store", f"{w}/prompts.jsonl"),
        "--lookup-store must be given with --lookup-branch N > 0 (it feeds that branch)",
    ),
    (
        "speculate-lookup-store-missing",
        lambda w, b: _speculate(w, "--lookup-branch", "4", "--lookup-store", f"{b}/none.jsonl", "--prompts", "heldout"),
        "none.jsonl' does not exist",
    ),
    (  # refused before the target loads: with no target at all, the store's file is still what it names
        "speculate-lookup-store-missing-before-target",
        lambda w, b: [
            *_speculate(w, "--lookup-branch", "4", "--lookup-store", f"{b}/none.jsonl"),
            "--target",
            f"{b}/t",
        ],
        "none.jsonl' does not exist",
    ),
    (
        "speculate-draft-precision",
        lambda w, b: _speculate(w, "--draft-precision", "fp16"),
        "--draft-precision must be same, fp32, bf16 or int8, not fp16",
    ),
    (
        "speculate-auto-products-with-packed",
        lambda w, b: _speculate(w, "--auto-products", "--packed"),
        "--auto-products must be given alone (it chooses --one-row and --packed), not True",
    ),
    (
        "speculate-runner-up-dflash",
        lambda w, b: _speculate(w, "--runner-up", "0.1"),
        "--runner-up is for an EAGLE-3 chain",
    ),
    (
        "speculate-top-p",
        lambda w, b: _speculate(w, "--top-p", "0", "--temperature", "-1"),
        "--top-p must be in (0, 1]",
    ),
    (
        "speculate-prompts-missing",
        lambda w, b: _speculate(w, "--prompts", f"{b}/none.jsonl"),
        "none.jsonl' does not exist",
    ),
    # the self-drafting adaptation: settings and files are checked before the run directory is made
    (
        "adapt-missing-data",
        lambda w, b: ["adapt", "--target", f"{w}/target", "--data", f"{b}/none.jsonl", "--output-dir", f"{b}/ad"],
        "is not a file: make one with `mdlm-kit make-chat-data",
    ),
    (
        "adapt-block-of-one",
        lambda w, b: ["adapt", "--data", f"{w}/chat.jsonl", "--output-dir", f"{b}/ad", "--block-size", "1"],
        "--block-size must be at least 2",
    ),
    (
        "adapt-config-missing",
        lambda w, b: ["adapt", "--config", f"{b}/none.toml", "--output-dir", f"{b}/ad"],
        "none.toml' does not exist",
    ),
    # playground flags
    ("playground-port", lambda w, b: ["playground", "--checkpoint", f"{w}/run/inference", "--port", "70000"], "--port"),
    ("playground-checkpoint", lambda w, b: ["playground", "--checkpoint", f"{b}/none"], "not an inference directory"),
    (
        "playground-target-alone",
        lambda w, b: ["playground", "--checkpoint", f"{w}/run/inference", "--target", f"{w}/target"],
        "go together",
    ),
]


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _copy_inf(w, b, name):
    d = b / name
    shutil.copytree(w / "run" / "inference", d)
    return d


def _trunc(w, b):
    d = _copy_inf(w, b, "trunc")
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[:100])
    return str(d)


def _pickled(w, b):
    d = _copy_inf(w, b, "pickled")
    (d / "model.safetensors").write_bytes(pickle.dumps(Evil()))
    return str(d)


def _swapped_tok(w, b):
    from mdlm_kit.text.tokenizer import train_tokenizer

    d = _copy_inf(w, b, "swapped")
    train_tokenizer(["a completely different tiny corpus, " * 50], vocab_size=300).save_pretrained(str(d))
    return str(d)


def _incomplete(w, b):
    d = b / "inc"
    shutil.copytree(w / "feats", d)
    idx = json.loads((d / "index.json").read_text())
    idx["complete"] = False
    (d / "index.json").write_text(json.dumps(idx))
    return str(d)


@pytest.mark.parametrize("case, argv, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input(ws, tmp_path, capsys, case, argv, message):
    args = argv(ws, tmp_path)
    before = tree_digest(ws)
    flag = Path("/tmp/mdlm_kit_pwned")
    flag.unlink(missing_ok=True)
    try:
        rc = main([str(a) for a in args])
    except SystemExit as e:
        rc = e.code  # argparse's own refusals exit 2 as well
    err = capsys.readouterr().err
    assert rc == 2, f"{case}: exit code {rc}\n{err}"
    assert message in err, f"{case}: message does not mention {message!r}:\n{err}"
    assert "Traceback" not in err
    assert tree_digest(ws) == before, f"{case}: the workspace changed"
    assert not flag.exists(), "a pickled payload was executed"


def test_every_command_has_bad_input_cases(ws, tmp_path):
    "Each subcommand that reads files or flags is exercised by at least one case above."
    from mdlm_kit.cli.main import make_parser

    sub = next(a for a in make_parser()._actions if a.dest == "command")
    covered = {argv(ws, tmp_path / case)[0] for case, argv, _ in CASES}
    missing = set(sub.choices) - covered - {"quickstart", "prepare"}  # those two are `train` with a built-in config
    assert not missing, f"no bad-input case for: {sorted(missing)}"
