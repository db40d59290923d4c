"""Every tensor the kit creates names its device (`DeviceAudit`): the CPU suite's stand-in for a GPU run, where a
tensor made on the CPU beside a CUDA or MPS model crashes or samples from the wrong generator."""

import pytest
import torch
from mdlm_kit.core.device import DeviceAudit
from mdlm_kit.core.config import ModelConfig
from mdlm_kit.mdlm.model import DiffusionTransformer
from mdlm_kit.drafts.targets import tiny_target


@pytest.fixture(scope="module")
def target():
    torch.manual_seed(0)
    return tiny_target("llama", num_layers=6)


def _check(audit):
    assert not audit.found, "tensors made without device= (pass the device of the tensor they meet): " + ", ".join(
        sorted(audit.found)
    )


def test_speculative_decoders_name_their_devices(target):
    from mdlm_kit.drafts.dflash import DFlashConfig, DFlashDraftModel
    from mdlm_kit.drafts.eagle3 import Eagle3Config, Eagle3DraftModel
    from mdlm_kit.drafts.speculate import make_proposer
    from mdlm_kit.drafts.verification import NgramStore, PromptLookupProposer, plain_decode, speculative_decode
    from mdlm_kit.drafts.verification import SamplingParams

    tables = target.embeddings_and_head()
    df = DFlashDraftModel(DFlashConfig.from_target(target.config, mask_token_id=0, block_size=4, num_feature_layers=2))
    e3 = Eagle3DraftModel(Eagle3Config.from_target(target.config, ttt_length=2))
    p = torch.randint(5, target.vocab_size, (7,)).tolist()
    with DeviceAudit() as audit:
        for sp in (SamplingParams(), SamplingParams(temperature=1.0, top_k=5, top_p=0.9)):
            plain_decode(target, p, 6, sp)
            settings = ((df, 0, 0, 0), (e3, 0, 0, 0), (e3, 4, 0, 0), (df, 0, 3, 0), (e3, 0, 3, 0), (e3, 4, 3, 0))
            for d, tree, branch, ru in settings + ((e3, 0, 0, 1e-9), (e3, 0, 3, 1e-9)):
                proposer = make_proposer(
                    d, tables, 3, tree_nodes=tree, tree_top_k=2, lookup_branch=branch, runner_up=ru
                )
                r = speculative_decode(target, proposer, p + p if branch else p, 6, sp)  # a repeat: a branch to graft
                assert len(r.tokens) == 6
            for branches in (1, 3):
                r = speculative_decode(target, PromptLookupProposer(3, ngram=1, branches=branches), p + p, 6, sp)
                assert len(r.tokens) == 6
            store = NgramStore([p + p[:4]], max_n=3)  # a store that continues the prompt: a branch from it
            r = speculative_decode(target, make_proposer(e3, tables, 3, lookup_branch=3, lookup_store=store), p, 6, sp)
            assert len(r.tokens) == 6
    _check(audit)


def test_mdlm_samplers_objective_and_ar_name_their_devices():
    from mdlm_kit.mdlm.diffusion import ar_loss, ar_nll, corrupt, diffusion_loss, elbo_bound, sample_times
    from mdlm_kit.mdlm.sampling import SAMPLERS, ar_generate, generate

    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=64, n_layer=1, n_head=2, d_model=32, max_seq_len=32, mask_token_id=3, local_mixing=1, head_bias=True
    )
    m = DiffusionTransformer(cfg).eval()
    x = torch.randint(4, 64, (2, 32))
    with DeviceAudit() as audit:
        for s in SAMPLERS:
            out = generate(m, [5, 6], 12, 6, s, temperature=1.0, top_k=4, block_length=4 if s == "blocks" else None)
            assert out.shape == (1, 14)
        assert ar_generate(m, [5, 6], 5, bos_id=1, top_k=3).shape == (1, 7)
        t = sample_times(2)
        corrupt(x, t, 3)
        diffusion_loss(m, x, t, 3)
        elbo_bound(m, [x], 3, n_levels=2)
        ar_loss(m, x, 1)
        ar_nll(m, [x], 1)
    _check(audit)


def test_drafter_training_forwards_name_their_devices(target):
    from mdlm_kit.drafts.dflash import DFlashConfig, DFlashDraftModel, dflash_forward, sample_anchors
    from mdlm_kit.drafts.eagle3 import Eagle3Config, Eagle3DraftModel, eagle3_forward

    tables = target.embeddings_and_head()
    df = DFlashDraftModel(DFlashConfig.from_target(target.config, mask_token_id=0, block_size=4, num_feature_layers=2))
    e3 = Eagle3DraftModel(Eagle3Config.from_target(target.config, ttt_length=2))
    x = torch.randint(5, target.vocab_size, (2, 24))
    lm = torch.ones_like(x)
    h = target(x, layer_ids=df.config.target_layer_ids).hidden_states
    o3 = target(x, layer_ids=e3.config.eagle_aux_hidden_state_layer_ids)
    with DeviceAudit() as audit:
        anchors, keep = sample_anchors(lm, 3, [1, 2])
        for backend in ("sdpa", "eager", "structured"):
            dflash_forward(df, tables, x, lm, h, anchors, keep, backend=backend)
        eagle3_forward(e3, tables, x, lm, o3.hidden_states, o3.logits)
    _check(audit)


@pytest.mark.parametrize("objective", ["mdlm", "ar"])
def test_trainer_steps_evaluation_and_checkpoints_name_their_devices(tmp_path, tiny_config, objective):
    from mdlm_kit.core.config import apply_overrides, load_config
    from mdlm_kit.mdlm.train import Trainer

    cfg = apply_overrides(
        load_config(tiny_config),
        [
            f'training.objective="{objective}"',
            "training.max_steps=3",
            "training.eval_interval=3",
            "training.save_interval=3",
        ],
    )
    with DeviceAudit() as audit:
        Trainer(cfg, tmp_path / "r", progress=False, log=lambda *a: None).run()
    _check(audit)


def _draft_trainer(tmp_path, algorithm, **kw):
    from conftest import save_tiny_target_and_chat, tiny_draft_config
    from mdlm_kit.drafts.train import DraftTrainer

    tgt = save_tiny_target_and_chat(tmp_path, "llama")
    extra = dict(block_size=4, num_feature_layers=2, num_anchors=4) if algorithm == "dflash" else dict(ttt_length=2)
    run = {"eval_data_path": str(tmp_path / "chat.jsonl"), "target_model_path": str(tmp_path / "t"), "max_steps": 2}
    cfg = tiny_draft_config(
        tmp_path / "chat.jsonl", algorithm, **{**run, "eval_interval": 2, "save_interval": 2, **extra, **kw}
    )
    return DraftTrainer(cfg, tmp_path / "run", algorithm=algorithm, target=tgt, progress=False, log=lambda *a: None)


@pytest.mark.parametrize("algorithm", ["dflash", "eagle3"])
def test_draft_trainer_steps_name_their_devices(tmp_path, algorithm):
    with DeviceAudit() as audit:
        _draft_trainer(tmp_path, algorithm).run()
    _check(audit)


def test_draft_trainer_steps_through_the_loss_scaler(tmp_path):
    "fp16 on CUDA needs loss scaling; the draft loop must route backward, unscale, step and update through the scaler."
    calls = []

    class Recorder:
        def is_enabled(self):  # a scaler that scales: the step goes through it (and the host checks the loss)
            return True

        def scale(self, loss):
            calls.append("scale")
            return loss * 1.0

        def unscale_(self, opt):
            calls.append("unscale_")

        def step(self, opt):
            calls.append("step")
            opt.step()

        def update(self):
            calls.append("update")

        def state_dict(self):
            return {"calls": len(calls)}

        def load_state_dict(self, s):
            calls.append(("load", s))

    tr = _draft_trainer(tmp_path, "dflash", gradient_accumulation_steps=2)
    tr.scaler = Recorder()
    tr.train_step()
    assert calls == ["scale", "scale", "unscale_", "step", "update"]
    tr.save()  # the scaler's state travels with the checkpoint
    assert tr.ckpts.load(tr.ckpts.latest())["scaler"] == {"calls": 5}


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_draft_trainer_loads_the_target_in_its_precision_and_sets_the_backends(tmp_path, monkeypatch, precision):
    """Online, the trainer loads the frozen target with its weights in the training precision (the seeds load an 8B
    target in bf16, not fp32), runs its forward under the same autocast, and switches the backends (TF32 on CUDA)
    through `configure_backends`, as the MDLM trainer does."""
    from conftest import save_tiny_target_and_chat, tiny_draft_config
    from mdlm_kit.drafts import train
    from mdlm_kit.drafts.train import DraftTrainer

    configured, under_autocast = [], []
    monkeypatch.setattr(train, "configure_backends", lambda dev: configured.append(dev))
    save_tiny_target_and_chat(tmp_path, "llama")
    cfg = tiny_draft_config(
        tmp_path / "chat.jsonl",
        "eagle3",
        target_model_path=str(tmp_path / "t"),
        precision=precision,
        ttt_length=2,
        max_steps=1,
    )
    tr = DraftTrainer(cfg, tmp_path / "run", algorithm="eagle3", progress=False, log=lambda *a: None)
    want = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
    assert {p.dtype for p in tr.target.model.parameters()} == {want}
    assert configured == [torch.device("cpu")]
    forward = tr.target.forward
    monkeypatch.setattr(
        tr.target,
        "forward",
        lambda *a, **k: under_autocast.append(torch.is_autocast_enabled("cpu")) or forward(*a, **k),
    )
    tr.run()
    assert under_autocast and set(under_autocast) == {precision == "bf16"}  # every target forward, as the loss's


def test_no_fp32_params_casts_the_weights_and_keeps_the_rotary_frequencies(tmp_path):
    "`--no-fp32-params` under bf16: every parameter in bf16, RoPE's inv_freq still fp32 (bf16 would blur positions)."
    tr = _draft_trainer(tmp_path, "dflash", precision="bf16", fp32_params=False)
    assert {p.dtype for p in tr.model.parameters()} == {torch.bfloat16}
    freqs = {name: b.dtype for name, b in tr.model.named_buffers() if "inv_freq" in name}
    assert freqs and set(freqs.values()) == {torch.float32}, freqs
