"The playground: callbacks called directly, the launched app through"

"gradio_client on 127.0.0.1, and the page in a real headless Chromium."

import os, shutil, socket
from pathlib import Path
import pytest
import torch
from mdlm_kit.ui.playground import (
    Limits,
    Playground,
    PlaygroundError,
    demo_checkpoint,
    denoise_frames,
    speculative_frames,
)
from mdlm_kit.mdlm.sampling import load_inference, transfer_schedule
from mdlm_kit.drafts.verification import plain_decode
from mdlm_kit.cli.main import main
from mdlm_kit.core.checkpoint import CheckpointError

from conftest import CHROMIUM, CHROMIUM_MISSING


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return demo_checkpoint(tmp_path_factory.mktemp("served") / "demo")


@pytest.fixture(scope="module")
def spec():
    from mdlm_kit.drafts.targets import tiny_target
    from mdlm_kit.drafts.dflash import DFlashConfig, DFlashDraftModel

    torch.manual_seed(0)
    tgt = tiny_target("llama", num_layers=6, hidden_size=64)
    return tgt, DFlashDraftModel(
        DFlashConfig.from_target(tgt.config, mask_token_id=0, block_size=4, num_feature_layers=2)
    )


def test_frames_stream_every_step_and_never_change_revealed_tokens(ckpt):
    model, tok = load_inference(ckpt, "cpu")
    for sampler in ("confidence", "ancestral", "blocks"):
        frames = list(
            denoise_frames(model, tok, "The class", length=16, steps=8, sampler=sampler, block_length=8, seed=3)
        )
        assert len(frames) == 9 and frames[0].n_new == 0 and frames[-1].n_masked == 0
        assert sum(f.n_new for f in frames) == 16
        prompt_len = sum(l == "prompt" for _, l in frames[0].pieces)
        assert prompt_len == len(tok("The class", add_special_tokens=False)["input_ids"])
        for a, b in zip(frames, frames[1:]):
            assert b.n_masked == a.n_masked - b.n_new
            assert sum(l == "new" for _, l in b.pieces) == b.n_new
            for (ta, la), (tb, lb) in zip(a.pieces, b.pieces):
                if la != "masked":
                    assert tb == ta
    conf = list(denoise_frames(model, tok, "", length=10, steps=4, sampler="confidence"))
    assert [f.n_new for f in conf[1:]] == transfer_schedule(10, 4) == [3, 3, 2, 2]


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(length=0), "length must be between 1 and 256"),
        (dict(length=257), "length must be between 1 and 256"),
        (dict(steps=10_000), "steps must be between 1 and 1024"),
        (dict(steps=0), "steps must be between 1 and 1024"),  # refused, not quietly made 1
        (dict(steps=float("inf")), "steps must be a number"),
        (dict(temperature=-1), "temperature must be between 0.0 and 2.0"),
        (dict(seed=-5), "seed must be between"),
        (dict(sampler="greedy"), "sampler must be one of"),
        (dict(prompt="x" * 3000), "limit is 2000"),
        (dict(length=100, prompt="word " * 60), "exceeds the model's context"),
        (dict(sampler="blocks", length=12, block_length=5), "multiple of the block length"),
    ],
)
def test_out_of_range_fields_are_refused_with_a_message(ckpt, kw, message):
    model, tok = load_inference(ckpt, "cpu")
    args = dict(prompt="The", length=16, steps=8) | kw
    with pytest.raises(PlaygroundError, match=message):
        list(denoise_frames(model, tok, **args))


def test_only_checkpoints_under_the_served_directories_load(ckpt, tmp_path):
    outside = demo_checkpoint(tmp_path / "other")
    pg = Playground(ckpt, roots=[ckpt.parent])
    assert pg.model(str(ckpt))[0] is pg.model(str(ckpt))[0]  # cached
    with pytest.raises(PlaygroundError, match="outside the directories"):
        pg.model(str(outside))
    link = ckpt.parent / "escape"
    link.symlink_to(outside, target_is_directory=True)
    try:
        with pytest.raises(PlaygroundError, match="outside the directories"):
            pg.model(str(link))
        with pytest.raises(PlaygroundError, match="outside the directories"):
            pg.model(str(ckpt.parent / ".." / outside.parent.name / "other"))
    finally:
        link.unlink()
    (ckpt.parent / "notamodel").mkdir(exist_ok=True)
    with pytest.raises(PlaygroundError, match="not an inference directory"):
        pg.model(str(ckpt.parent / "notamodel"))
    with pytest.raises(PlaygroundError, match="quickstart"):
        Playground().model("")


def test_pickled_checkpoint_is_not_loaded(ckpt, tmp_path):
    "A model.safetensors that is really a pickle is refused, and its payload never runs."
    bad = tmp_path / "bad"
    shutil.copytree(ckpt, bad)
    flag = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {flag}",))

    import pickle

    (bad / "model.safetensors").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(CheckpointError, match="cannot be read as safetensors"):
        Playground(bad, roots=[tmp_path]).model(str(bad))
    assert not flag.exists()


def test_speculative_frames_are_lossless_and_coloured_by_cycle(spec):
    tgt, draft = spec
    frames = list(speculative_frames(tgt, draft, "tell me", max_new_tokens=10))
    final = frames[-1]
    assert final.done and not any(f.done for f in frames[:-1])
    assert final.stats["lossless"] is True and final.stats["cycles"] == len(frames) - 1
    tok = tgt.tokenizer
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "tell me"}], tokenize=True, add_generation_prompt=True, return_dict=True
    )["input_ids"]
    ref = plain_decode(tgt, ids, 10, eos_token_id=tok.eos_token_id).tokens
    assert [t for t, _ in final.pieces] == [tok.decode([i]) for i in ref]
    assert {l for _, l in final.pieces} <= {"target", "accepted (cycle A)", "accepted (cycle B)"}
    assert final.pieces[0][1] == "target"  # the prefill's token is the target's
    with pytest.raises(PlaygroundError, match="prompt is empty"):
        list(speculative_frames(tgt, draft, "  "))
    with pytest.raises(PlaygroundError, match="max new tokens must be between 1 and 256"):
        list(speculative_frames(tgt, draft, "hi", 0))


def test_cli_refuses_bad_flags(ckpt, tmp_path, capsys):
    assert main(["playground", "--checkpoint", str(tmp_path / "missing")]) == 2
    assert "not an inference directory" in capsys.readouterr().err
    assert main(["playground", "--checkpoint", str(ckpt), "--port", "70000"]) == 2
    assert "--port must be between" in capsys.readouterr().err
    assert main(["playground", "--checkpoint", str(ckpt), "--target", "smollm2"]) == 2
    assert "--target and --draft go together" in capsys.readouterr().err
    assert main(["playground", "--checkpoint", str(ckpt), "--allow-dir", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(ckpt, spec):
    from mdlm_kit.ui.playground import launch

    tgt, draft = spec
    demo, url = launch(Playground(ckpt, roots=[ckpt.parent], target=tgt, draft=draft), port=_free_port(), block=False)
    yield url
    demo.close()


def test_app_over_gradio_client_streams_steps(served, ckpt):
    from gradio_client import Client

    c = Client(served, verbose=False)
    job = c.submit(str(ckpt), "The", 12, 4, "confidence", 4, 1.0, 0, api_name="/denoise")
    job.result()
    outs = job.outputs()
    assert len(outs) == 6  # initial canvas + 4 steps + the final update
    canvases = [o[0] for o in outs]
    assert sum(t["class_or_confidence"] == "masked" for t in canvases[0]) == 12
    assert sum(t["class_or_confidence"] == "masked" for t in canvases[-1]) == 0
    assert outs[-1][2].startswith("done: 4 steps")
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="(greater than maximum value|length must be between 1 and 256)"):
        c.predict(str(ckpt), "The", 999, 4, "confidence", 4, 1.0, 0, api_name="/denoise")
    with pytest.raises(AppError, match="outside the directories"):
        c.predict("/etc", "The", 12, 4, "confidence", 4, 1.0, 0, api_name="/denoise")
    spec_job = c.submit("hello", 8, 3, 0.0, 0, api_name="/speculate")
    spec_job.result()
    assert "lossless: True" in spec_job.outputs()[-1][1]


def _listening(port: int) -> list[str]:
    "Local addresses (hex, as the kernel lists them) of the TCP sockets listening on `port` (Linux /proc/net)."
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.rsplit(":", 1)
            if state == "0A" and int(p, 16) == port:
                out.append(addr)
    return out


def test_server_binds_loopback_only(served):
    from urllib.parse import urlparse

    port = urlparse(served).port
    addrs = _listening(port)
    assert addrs, f"nothing listens on port {port}"
    assert set(addrs) == {"0100007F"}, addrs  # 127.0.0.1 only: no 0.0.0.0, no other interface


def test_page_in_headless_chromium_streams_tokens(served):
    if not Path(CHROMIUM).exists():
        pytest.fail(CHROMIUM_MISSING)
    from playwright.sync_api import sync_playwright

    flags = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--no-first-run",
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=flags)
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(served)
        page.get_by_role("button", name="Run", exact=True).click()
        page.wait_for_function(
            "document.querySelector('#status') && document.querySelector('#status').innerText.includes('done')",
            timeout=60_000,
        )
        tokens = page.locator("#canvas .token .text").all_inner_texts()
        status = page.locator("#status").inner_text()
        box = page.locator("#replay input[type=number]")  # scrub back to the all-masked canvas
        box.fill("0")
        box.press("Enter")
        page.wait_for_function("document.querySelector('#status').innerText.includes('step 0 of 64')", timeout=30_000)
        replayed = page.locator("#canvas .token .text").all_inner_texts()
        page.get_by_role("tab", name="Speculative decoding").click()
        page.get_by_role("button", name="Run speculative decoding").click()
        page.wait_for_function(
            "document.querySelector('#spec-status') && "
            "document.querySelector('#spec-status').innerText.includes('lossless')",
            timeout=60_000,
        )
        spec_status = page.locator("#spec-status").inner_text()
        spec_tokens = page.locator("#spec-output .token .text").all_inner_texts()
        browser.close()
    assert "lossless: True" in spec_status and "τ" in spec_status
    assert len(spec_tokens) == 64
    assert "done: 64 steps" in status  # the confidence sampler, 64 steps, by default
    assert len(tokens) >= 64 and not any("░" in t for t in tokens[-64:])
    assert sum("░" in t for t in replayed) == 64
    assert not errors, errors


def test_defaults_follow_the_model_and_bad_settings_are_explained(ckpt, tmp_path):
    from mdlm_kit.ui.playground import advice, context_length

    assert context_length(ckpt, 999) == 128  # the demo model's context, from its config.json
    assert context_length(tmp_path, 77) == 77
    assert advice("", 0.0).startswith("No prompt and temperature 0")
    assert advice("The", 0.0) == "" and advice("", 0.7) == ""


def test_autoregressive_checkpoint_is_refused_in_the_diffusion_tab(ckpt, tmp_path):
    import json

    ar = tmp_path / "ar"
    shutil.copytree(ckpt, ar)
    cfg = json.loads((ar / "config.json").read_text())
    (ar / "config.json").write_text(json.dumps({**cfg, "objective": "ar"}))
    with pytest.raises(PlaygroundError, match="autoregressive baseline"):
        Playground(ar, roots=[tmp_path]).model(str(ar))


def test_a_cancelled_request_stops_its_decode_thread(spec):
    import threading, time

    tgt, draft = spec
    frames = speculative_frames(tgt, draft, "tell me a long story", max_new_tokens=200, num_draft_tokens=1)
    next(frames)  # the first cycle arrived, then the page went away
    frames.close()
    deadline = time.time() + 10
    while (
        any(t.name == "mdlm-kit-speculative" and t.is_alive() for t in threading.enumerate()) and time.time() < deadline
    ):
        time.sleep(0.05)
    assert not any(t.name == "mdlm-kit-speculative" and t.is_alive() for t in threading.enumerate())


def test_numbers_out_of_any_range_and_a_bounded_model_cache(ckpt, tmp_path):
    from mdlm_kit.ui.playground import check_range

    for bad in (float("inf"), float("-inf"), float("nan"), "1e400"):
        with pytest.raises(PlaygroundError, match="steps must be"):
            check_range("steps", bad, 1, 10)
    with pytest.raises(PlaygroundError, match="temperature must be between"):
        check_range("temperature", float("inf"), 0.0, 2.0, float)
    other = demo_checkpoint(tmp_path / "other")
    pg = Playground(ckpt, roots=[ckpt.parent, tmp_path], limits=Limits(max_models=1))
    first = pg.model(str(ckpt))[0]
    pg.model(str(other))
    assert len(pg._models) == 1 and pg.model(str(ckpt))[0] is not first  # evicted, then loaded again
