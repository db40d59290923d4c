"""Self-drafting (lesson 22a): `mdlm-kit adapt` trains mask-row adapters and resumes exactly (after a pause and after a
kill), refuses a changed setting, and its adapters write chat answers (`sample`) and draft losslessly for their target
(`speculate`, fp32 and the bf16 exact-rows target)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mdlm_kit.cli.main import main

TINY_ADAPT = ["--batch-size", "2", "--max-length", "96", "--device", "cpu", "--save-interval", "2"]
TINY_ADAPT += ["--eval-interval", "4", "--log-interval", "2", "--rank", "4", "--no-progress"]


def adapt_args(tmp_path: Path, out: str, steps: int = 6) -> list[str]:
    chat = str(tmp_path / "chat.jsonl")
    base = ["adapt", "--target", str(tmp_path / "t"), "--data", chat, "--eval-data", chat, "--output-dir"]
    return base + [str(tmp_path / out), "--max-steps", str(steps), *TINY_ADAPT]


def adapters_of(run: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(run / "adapters" / "model.safetensors")


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture
def tiny_adapted(tmp_path):
    from conftest import save_tiny_target_and_chat

    save_tiny_target_and_chat(tmp_path, n=6)
    assert main(adapt_args(tmp_path, "whole")) == 0
    return tmp_path


def test_adapt_resumes_exactly_and_refuses_other_settings(tiny_adapted, capsys):
    tmp = tiny_adapted
    assert main(adapt_args(tmp, "halves") + ["--max-run-steps", "2"]) == 0
    assert main(adapt_args(tmp, "halves") + ["--resume"]) == 0
    assert same(adapters_of(tmp / "halves"), adapters_of(tmp / "whole"))
    events = [json.loads(line) for line in (tmp / "whole" / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "eval"] == [4, 6]
    assert json.loads((tmp / "whole" / "adapt_config.json").read_text())["rank"] == 4
    capsys.readouterr()
    assert main(adapt_args(tmp, "whole") + ["--resume", "--rank", "8"]) == 2
    assert "rank" in capsys.readouterr().err
    assert main(adapt_args(tmp, "other") + ["--block-size", "1"]) == 2
    assert "--block-size must be at least 2" in capsys.readouterr().err
    assert not (tmp / "other").exists()


def test_adapters_write_chat_answers_and_draft_losslessly(tiny_adapted, capsys):
    tmp, ad = tiny_adapted, str(tiny_adapted / "whole" / "adapters")
    capsys.readouterr()
    assert main(["sample", "--checkpoint", ad, "--prompt", "What is a class?", "--length", "8"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("(") and "forwards" in out[-1]  # the tokens and forwards it took
    prompts = tmp / "p.jsonl"
    prompts.write_text("".join(json.dumps({"turns": [q]}) + "\n" for q in ("What is a class?", "Explain loops.")))
    for prec in ("fp32", "bf16"):  # bf16 on a CPU: the exact-rows target (lesson 14) verifies the tail too
        res = tmp / f"{prec}.json"
        flags = ["--prompts", str(prompts), "--max-new-tokens", "12", "--no-progress", "--precision", prec]
        assert main(["speculate", "--target", str(tmp / "t"), "--draft", ad, *flags, "--output", str(res)]) == 0
        r = json.loads(res.read_text())
        assert (r["drafter"], r["lossless"], r["n_prompts"]) == ("selfdraft", True, 2)


def test_plain_decoding_beside_self_drafting_runs_the_bare_target(tiny_adapted, monkeypatch):
    import mdlm_kit.drafts.speculate as spec
    from mdlm_kit.drafts.speculate import load_draft, speculate
    from mdlm_kit.drafts.targets import TargetModel

    target = TargetModel.from_pretrained(str(tiny_adapted / "t"))
    ad = load_draft(str(tiny_adapted / "whole" / "adapters"), "cpu")
    hooks_seen = {"plain": [], "speculative": []}
    for name in hooks_seen:
        fn = getattr(spec, f"{name}_decode")
        monkeypatch.setattr(
            spec, f"{name}_decode", lambda *a, _f=fn, _n=name, **k: hooks_seen[_n].append(len(ad._hooks)) or _f(*a, **k)
        )
    r = speculate(target, ad, [[{"role": "user", "content": "What is a class?"}]], 8, progress=False)
    assert r["lossless"]
    assert hooks_seen["speculative"] == [2 + len(ad.config.linears)]  # the embedding's two and one a linear
    assert hooks_seen["plain"] == [0] and ad._hooks == []  # the baseline runs the target as it was loaded


@pytest.mark.slow
def test_adapt_resumes_exactly_after_a_kill(tiny_adapted):
    "SIGKILL once the first checkpoint is written; `--resume` ends on the uninterrupted run's adapters."
    tmp = tiny_adapted
    exe = Path(sys.executable).with_name("mdlm-kit")
    args = adapt_args(tmp, "killed")
    p = subprocess.Popen([str(exe), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = tmp / "killed" / "checkpoints" / "latest"
    t0 = time.time()
    while not ckpt.exists() and p.poll() is None and time.time() - t0 < 120:
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    assert p.wait() == -signal.SIGKILL  # killed mid-run, not finished
    assert main(args + ["--resume"]) == 0
    assert same(adapters_of(tmp / "killed"), adapters_of(tmp / "whole"))
