"""A training step waits for no device: between log intervals the MDLM trainer (all three objectives), both drafter
trainers (online and offline) and the self-drafting trainer make no call that would make the host wait for a GPU
(`HostSyncs`, lesson 02: reading a value back, a copy to the CPU, a boolean-mask gather), and a non-finite loss is
still caught."""

import pytest
import torch
from conftest import save_tiny_target_and_chat, tiny_draft_config
from mdlm_kit.core.config import apply_overrides, load_config
from mdlm_kit.core.device import HostSyncs


def _steps_without_waits(tr, n: int = 2):
    "A warm-up step (first-call set-up may read values), then `n` steps counted; the waits each made."
    tr.one_step()
    waits = []
    for _ in range(n):
        with HostSyncs() as s:
            tr.one_step()
        waits.append(s.calls)
    return waits


@pytest.mark.parametrize("objective", ["mdlm", "ar", "bd3lm"])
def test_mdlm_trainer_steps_make_no_host_sync(tmp_path, tiny_config, objective):
    from mdlm_kit.mdlm.train import Trainer

    cfg = apply_overrides(
        load_config(tiny_config),
        [f'training.objective="{objective}"', "training.max_steps=10", "training.gradient_accumulation_steps=2"],
    )
    tr = Trainer(cfg, tmp_path / "r", progress=False, log=lambda *a: None)
    assert _steps_without_waits(tr) == [[], []]


def test_bernoulli_masking_gathers_by_mask_and_the_counter_sees_it(tmp_path, tiny_config):
    "Per-token coin flips leave the masked count unknown on the host: the gather waits, and the count says so."
    from mdlm_kit.mdlm.train import Trainer

    cfg = apply_overrides(load_config(tiny_config), ['training.masking="bernoulli"', "training.max_steps=10"])
    tr = Trainer(cfg, tmp_path / "r", progress=False, log=lambda *a: None)
    waits = _steps_without_waits(tr, 1)[0]
    assert waits and all(w.startswith(("__getitem__", "nonzero")) for w in waits), waits


@pytest.mark.parametrize("algorithm", ["dflash", "eagle3"])
@pytest.mark.parametrize("offline", [False, True])
def test_drafter_trainer_steps_make_no_host_sync(tmp_path, algorithm, offline):
    from mdlm_kit.drafts.features import save_hidden_states
    from mdlm_kit.drafts.train import DraftTrainer

    tgt = save_tiny_target_and_chat(tmp_path, "llama")
    own = {"block_size": 4, "num_feature_layers": 2, "num_anchors": 4} if algorithm == "dflash" else {"ttt_length": 2}
    run = {"target_model_path": str(tmp_path / "t"), "max_steps": 10, "gradient_accumulation_steps": 2}
    cfg = tiny_draft_config(tmp_path / "chat.jsonl", algorithm, **run, **own)
    tr = DraftTrainer(cfg, tmp_path / "probe", target=tgt, progress=False, log=lambda *a: None)
    if offline:  # the same data as saved features: no target in the step
        save_hidden_states(tgt, tr.train_set, tr.objective.layer_ids, tmp_path / "feats", progress=False)
        cfg = tiny_draft_config(
            "", algorithm, **run, **own, train_data_path="", train_hidden_states_path=str(tmp_path / "feats")
        )
    tr = DraftTrainer(cfg, tmp_path / "run", target=None if offline else tgt, progress=False, log=lambda *a: None)
    assert _steps_without_waits(tr) == [[], []]


def test_self_draft_trainer_steps_make_no_host_sync(tmp_path):
    "Lesson 22a's trainer decides its masks, mask rows and scored positions on the host: the device gets index lists."
    from mdlm_kit.drafts.selfdraft import AdaptSettings, SelfDraftTrainer

    tgt = save_tiny_target_and_chat(tmp_path, "llama")
    s = AdaptSettings(target=str(tmp_path / "t"), data=str(tmp_path / "chat.jsonl"), batch_size=2, max_length=96)
    s.rank, s.max_steps, s.device, s.distill = 4, 10, "cpu", 0.5
    tr = SelfDraftTrainer(s, tmp_path / "run", target=tgt, progress=False, log=lambda *a: None)
    assert _steps_without_waits(tr) == [[], []]


def test_a_nonfinite_drafter_step_is_skipped_on_the_device(tmp_path):
    "No host check in the step, and still no update from a NaN loss: the fused AdamW skips it."
    from mdlm_kit.drafts.train import DraftTrainer

    tgt = save_tiny_target_and_chat(tmp_path, "llama")
    cfg = tiny_draft_config(tmp_path / "chat.jsonl", "eagle3", ttt_length=2, max_steps=4, skip_nonfinite=True)
    tr = DraftTrainer(cfg, tmp_path / "run", target=tgt, progress=False, log=lambda *a: None)
    tr.one_step()
    loss = tr.objective.loss
    tr.objective.loss = lambda *a, **k: {**(o := loss(*a, **k)), "numerator": o["numerator"] * float("nan")}
    before = [p.detach().clone() for p in tr.model.parameters()]
    with HostSyncs() as s:
        tr.one_step()
    assert s.calls == []
    assert all(torch.equal(a, b) for a, b in zip(before, tr.model.parameters()))
    tr.settle()
    assert [e["step"] for e in tr.events.read("skipped_step")] == [1]


def test_a_run_saved_with_an_unfused_adamw_resumes(tmp_path, tiny_config):
    """A checkpoint from before the fused AdamW (its groups say `fused: None`) resumes: the loaded groups decide, so
    that optimizer skips a non-finite step by asking the host instead of failing on `found_inf`."""
    from mdlm_kit.mdlm.train import Trainer

    cfg = apply_overrides(load_config(tiny_config), ["training.max_steps=4", "training.save_interval=2"])
    old = Trainer(cfg, tmp_path / "r", max_run_steps=2, progress=False, log=lambda *a: None)
    groups = [{"params": g["params"], "weight_decay": g["weight_decay"]} for g in old.optimizer.param_groups]
    old.optimizer = torch.optim.AdamW(groups, lr=1e-3)  # the same groups, not fused
    old.run()
    new = Trainer(cfg, tmp_path / "r", resume=True, progress=False, log=lambda *a: None)
    assert not new.optimizer.param_groups[0]["fused"]
    assert new.run()["completed"] and new.step == 4
