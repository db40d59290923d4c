"A NaN/inf loss in a drafter run stops it with a message and"

"the last good checkpoint intact, or skips the step when asked."

import json
import pytest
from conftest import TINY_OWN, tiny_draft_config
import torch
from mdlm_kit.core.checkpoint import safe_torch_load
from mdlm_kit.drafts.train import DraftTrainer
from mdlm_kit.drafts.targets import tiny_target
from mdlm_kit.drafts.chat_data import topics_chat


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("nan")
    return tiny_target("qwen3", num_layers=5), topics_chat(d / "chat.jsonl")


def _trainer(setup, out, algo, **kw):
    tgt, chat = setup
    run = {"num_epochs": 1, "max_steps": 5, "log_interval": 1, "save_interval": 1, "seed": 3, "learning_rate": 3e-3}
    cfg = tiny_draft_config(chat, algo, **{**TINY_OWN[algo], **run, **kw})
    tr = DraftTrainer(cfg, out, algo, target=tgt, progress=False, log=lambda *a: None)
    loss = tr.objective.loss

    def poisoned(*a, **k):  # the third optimizer step's loss is NaN
        out = loss(*a, **k)
        if tr.step == 2:
            out["numerator"] = out["numerator"] * float("nan")
        return out

    tr.objective.loss = poisoned
    return tr


@pytest.mark.parametrize("algo", ["dflash", "eagle3"])
def test_nonfinite_loss_stops_with_last_good_checkpoint(setup, tmp_path, algo):
    tr = _trainer(setup, tmp_path / "run", algo)
    with pytest.raises(RuntimeError, match=r"loss became nan.*step_00000002\.pt.*--skip-nonfinite"):
        tr.run()
    assert tr.ckpts.latest().name == "step_00000002.pt"
    state = safe_torch_load(tr.ckpts.latest())
    assert all(torch.isfinite(v).all() for v in state["model"].values())  # nothing NaN was ever saved
    assert all(torch.isfinite(p).all() for p in tr.model.parameters())  # and nothing was updated with it


@pytest.mark.parametrize("algo", ["dflash", "eagle3"])
def test_nonfinite_loss_skipped_when_asked(setup, tmp_path, algo):
    tr = _trainer(setup, tmp_path / "run", algo, skip_nonfinite=True)
    before = None
    orig_step = tr.train_step

    def watch():
        nonlocal before
        if tr.step == 2:
            before = {k: v.clone() for k, v in tr.model.state_dict().items()}
        r = orig_step()
        if tr.step == 3:
            assert all(torch.equal(before[k], v) for k, v in tr.model.state_dict().items()), (
                "skipped step changed weights"
            )
        return r

    tr.train_step = watch
    r = tr.run()
    assert r["completed"] and tr.step == 5
    evs = [json.loads(l) for l in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evs if e["event"] == "skipped_step"] == [2]
    assert all(torch.isfinite(p).all() for p in tr.model.parameters())
