"EAGLE-3 drafter: alignment, TTT mask, vocabulary mapping, online = offline, exact resume, serving layout."

import json, shutil
import pytest
from conftest import TINY_EAGLE3, TINY_STEPS, logged_step, save_tiny_target_and_chat, tiny_draft_config
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from mdlm_kit.core.checkpoint import CheckpointError
from mdlm_kit.drafts.train import DraftTrainer
from mdlm_kit.drafts.eagle3 import (
    Eagle3Config,
    Eagle3DraftModel,
    Eagle3Error,
    build_vocab_mapping,
    default_aux_layer_ids,
    eagle3_forward,
    shift_left,
    ttt_attention_mask,
)
from mdlm_kit.drafts.features import save_hidden_states
from mdlm_kit.drafts.targets import tiny_target
from test_dflash import _events


def test_alignment_by_hand():
    assert default_aux_layer_ids(30) == [1, 14, 26]  # SmolLM2: inputs of layers 2, 15 and 27
    x = torch.tensor([[10, 11, 12, 13]])
    assert shift_left(x, 1).tolist() == [[11, 12, 13, 0]]  # step 0 pairs h_t with x_{t+1}
    assert shift_left(x, 3).tolist() == [[13, 0, 0, 0]]


def test_ttt_mask_by_hand():
    m = ttt_attention_mask(4, 1)
    want = torch.zeros(4, 8, dtype=torch.bool)
    for t in range(4):
        want[t, : t + 1] = True  # causal over step-0 keys
        want[t, 4 + t] = True  # its own position at step 1
    assert torch.equal(m, want)


def test_vocab_mapping_round_trip():
    g = torch.Generator().manual_seed(0)
    samples = [
        {"input_ids": torch.randint(0, 50, (40,), generator=g), "loss_mask": torch.randint(0, 2, (40,), generator=g)}
        for _ in range(5)
    ]
    d2t, t2d = build_vocab_mapping(samples, 60, 20)
    tids = torch.arange(20) + d2t
    assert torch.equal(tids, tids.sort().values) and t2d.sum() == 20 and t2d[tids].all()
    # draft id -> target id -> draft id
    t2d_index = torch.cumsum(t2d.long(), 0) - 1
    assert torch.equal(t2d_index[tids], torch.arange(20))
    with pytest.raises(Eagle3Error, match="draft-vocab-size"):
        build_vocab_mapping(samples, 60, 61)


def test_soft_loss_ignores_out_of_vocab_targets():
    tgt = tiny_target("llama", num_layers=5)
    cfg = Eagle3Config.from_target(tgt.config, draft_vocab_size=4, ttt_length=1)
    d = Eagle3DraftModel(cfg)
    d2t, t2d = build_vocab_mapping(
        [{"input_ids": torch.tensor([5, 6, 7, 8]), "loss_mask": torch.ones(4, dtype=torch.long)}], tgt.vocab_size, 4
    )
    d.set_vocab(d2t, t2d)
    x = torch.randint(10, 100, (1, 6))
    tables = tgt.embeddings_and_head()
    aux = torch.randn(1, 6, 3 * cfg.hidden_size)
    logits = torch.full((1, 6, tgt.vocab_size), -10.0)
    logits[..., 50] = 10.0  # target top-1 (id 50) outside the draft vocab
    r = eagle3_forward(d, tables, x, torch.ones_like(x), aux, logits)
    assert r["numerator"].item() == 0.0 and r["pos_correct"].item() == 0.0
    logits[0, 3, 6] = 20.0  # one position whose top-1 is in it
    assert eagle3_forward(d, tables, x, torch.ones_like(x), aux, logits)["numerator"].item() > 0


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny3")
    tgt = save_tiny_target_and_chat(d, "llama", n=8, num_layers=6, answer_chars=200, name="target")
    return tgt, d / "chat.jsonl", d


def _cfg(chat, **kw):
    own = {"seed": 1, "learning_rate": 1e-3, "max_length": 96}
    return tiny_draft_config(chat, "eagle3", **{**TINY_EAGLE3, **TINY_STEPS, **own, **kw})


def test_online_equals_offline(tiny, tmp_path):
    tgt, chat, d = tiny
    quiet = dict(progress=False, log=lambda *a: None)
    on = DraftTrainer(_cfg(chat, target_model_path=str(d / "target")), tmp_path / "on", "eagle3", target=tgt, **quiet)
    assert on.objective.layer_ids == [1, 2, 2, 5]
    feats = tmp_path / "feats"
    save_hidden_states(tgt, on.train_set, on.objective.layer_ids, feats, dtype="fp32", progress=False)
    off = DraftTrainer(
        _cfg(chat, target_model_path=str(d / "target"), train_data_path="", train_hidden_states_path=str(feats)),
        tmp_path / "off",
        "eagle3",
        **quiet,
    )
    assert torch.equal(on.model.d2t, off.model.d2t)
    # offline, the saved top-1 replaces the whole head (only the draft vocabulary's columns are computed)
    assert on.batch(on.train_set, [0])[3] is None
    ids, _, _, top1, _ = off.batch(off.train_set, [0])
    assert top1.shape == ids.shape
    a, b = logged_step(on), logged_step(off)
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-5) and set(a) >= {"acc_0", "acc_1", "acc_2"}
    # features saved before the top-1 was (no target_top1): the whole head again, the same loss
    old = tmp_path / "old"
    old.mkdir()
    index = json.loads((feats / "index.json").read_text())
    del index["target_top1"]
    (old / "index.json").write_text(json.dumps(index))
    for sh in index["shards"]:
        t = load_file(str(feats / sh["file"]))
        save_file({k: v for k, v in t.items() if not k.endswith(".target_top1")}, str(old / sh["file"]))
    legacy = DraftTrainer(
        _cfg(chat, target_model_path=str(d / "target"), train_data_path="", train_hidden_states_path=str(old)),
        tmp_path / "legacy",
        "eagle3",
        **quiet,
    )
    assert legacy.batch(legacy.train_set, [0])[3] is None
    assert logged_step(legacy)["loss"] == pytest.approx(b["loss"], rel=1e-5)


def test_resume_exact_and_serving_layout(tiny, tmp_path):
    tgt, chat, _ = tiny
    quiet = dict(target=tgt, progress=False, log=lambda *a: None)
    DraftTrainer(_cfg(chat), tmp_path / "full", "eagle3", **quiet).run()
    DraftTrainer(_cfg(chat), tmp_path / "part", "eagle3", max_run_steps=1, **quiet).run()
    DraftTrainer(_cfg(chat), tmp_path / "part", "eagle3", resume=True, **quiet).run()
    la = [e["loss"] for e in _events(tmp_path / "full", "train")]
    assert len(la) >= 3 and la == [e["loss"] for e in _events(tmp_path / "part", "train")]
    draft = tmp_path / "full" / "draft"
    cfg = json.loads((draft / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["draft_vocab_size"] == 64
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 2, 2] and cfg["tie_word_embeddings"] is False
    assert cfg["rope_scaling"] is None and cfg["rope_theta"] == 10000.0  # plain RoPE, spelled for transformers 4.x
    assert (cfg["torch_dtype"], cfg["dtype"]) == ("bfloat16", "bfloat16")  # served as saved, beside a bf16 target
    with safe_open(str(draft / "model.safetensors"), "pt") as f:
        names = set(f.keys())
        assert f.get_tensor("fc.weight").dtype == torch.bfloat16
    assert names == {
        "d2t",
        "t2d",
        "fc.weight",
        "norm.weight",
        "lm_head.weight",
        "midlayer.hidden_norm.weight",
        "midlayer.input_layernorm.weight",
        "midlayer.post_attention_layernorm.weight",
        *(f"midlayer.self_attn.{p}_proj.weight" for p in "qkvo"),
        *(f"midlayer.mlp.{p}_proj.weight" for p in ("gate", "up", "down")),
    }
    m = Eagle3DraftModel.from_pretrained(draft)
    assert m.config.draft_vocab_size == 64
    with pytest.raises(CheckpointError, match="not an EAGLE-3"):
        from mdlm_kit.drafts.dflash import DFlashDraftModel, DFlashConfig

        DFlashDraftModel(DFlashConfig(target_layer_ids=[0], vocab_size=10, mask_token_id=0)).save_pretrained(
            tmp_path / "df"
        )
        Eagle3DraftModel.from_pretrained(tmp_path / "df")


def test_profile_writes_a_trace(tiny, tmp_path):
    tgt, chat, _ = tiny
    DraftTrainer(
        _cfg(chat, max_steps=2, profile=True, profile_start_step=0, profile_num_steps=1),
        tmp_path / "p",
        "eagle3",
        target=tgt,
        progress=False,
        log=lambda *a: None,
    ).run()
    traces = list((tmp_path / "p" / "profile").glob("*.json"))
    assert len(traces) == 1 and traces[0].stat().st_size > 1000


def test_head_init_from_target(tiny, tmp_path):
    "--init-head-from-target: the head is the target's rows of the draft vocabulary; the norm is the features' scale."
    tgt, chat, _ = tiny
    quiet = dict(target=tgt, progress=False, log=lambda *a: None)
    plain = DraftTrainer(_cfg(chat), tmp_path / "a", "eagle3", **quiet)
    warm = DraftTrainer(_cfg(chat, init_head_from_target=True), tmp_path / "b", "eagle3", **quiet)
    head = tgt.embeddings_and_head().head_weight
    ids = warm.model.draft_ids()
    assert ids.shape == (64,) and torch.equal(warm.model.lm_head.weight, head[ids])
    assert not torch.allclose(plain.model.lm_head.weight, head[ids])
    H = warm.model.config.hidden_size
    last = warm.batch(warm.train_set, warm.micro_batch(0)[0])[2][..., 3 * H :].reshape(-1, H)
    last = last[last.abs().sum(-1) > 0]  # the real rows of the first batch
    torch.testing.assert_close(warm.model.norm.weight, last.pow(2).mean(0).sqrt())
    assert torch.equal(plain.model.norm.weight, torch.ones(H))
    assert torch.equal(warm.model.fc.weight, plain.model.fc.weight)  # the rest starts as before


def test_resume_rewrites_a_missing_or_stale_export(tiny, tmp_path):
    "A kill after the last checkpoint but before its export: resuming the finished run writes the export again."
    tgt, chat, _ = tiny
    quiet = dict(target=tgt, progress=False, log=lambda *a: None)
    DraftTrainer(_cfg(chat), tmp_path / "r", "eagle3", **quiet).run()
    draft = tmp_path / "r" / "draft"
    want = (draft / "model.safetensors").read_bytes()
    shutil.rmtree(draft)
    DraftTrainer(_cfg(chat), tmp_path / "r", "eagle3", resume=True, **quiet).run()
    assert (draft / "model.safetensors").read_bytes() == want


def test_a_scaled_rope_is_saved_where_transformers_4_readers_look(tmp_path):
    "Llama 3's scaled RoPE goes into config.json's `rope_scaling` (plain RoPE: null), and loads back as it was."
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0}
    rope |= {"high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    cfg = Eagle3Config(vocab_size=100, draft_vocab_size=32, eagle_aux_hidden_state_layer_ids=[0, 1, 2])
    cfg.rope_parameters, cfg.num_target_layers = rope, 4
    Eagle3DraftModel(cfg).save_pretrained(tmp_path / "d")
    saved = json.loads((tmp_path / "d" / "config.json").read_text())
    assert saved["rope_scaling"] == {k: v for k, v in rope.items() if k != "rope_theta"} and saved["rope_theta"] == 5e5
    assert Eagle3DraftModel.from_pretrained(tmp_path / "d").config.rope_parameters == rope
