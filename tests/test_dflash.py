"DFlash drafter: masks, anchors, weights, chat masks, online = offline, exact resume, and bad input."

import json
from pathlib import Path
import pytest
from conftest import TINY_DFLASH, TINY_STEPS, logged_step, save_tiny_target_and_chat, tiny_draft_config
import torch
from mdlm_kit.drafts.chat_data import ChatDataError, build_chat_dataset, load_conversations, tokenize_conversation
from mdlm_kit.core.checkpoint import CheckpointError
from mdlm_kit.drafts.dflash import (
    DFlashConfig,
    DFlashError,
    dflash_attention_mask,
    dflash_blocks,
    dflash_position_weights,
    sample_anchors,
)
from mdlm_kit.drafts.dflash import resolve_mask_token_id
from mdlm_kit.drafts.train import DraftTrainer
from mdlm_kit.drafts.features import FeaturesError, HiddenStates, save_hidden_states
from mdlm_kit.drafts.targets import TargetError, tiny_target, tiny_tokenizer

# SmolLM2-135M-Instruct's chat template (from its GGUF metadata): no {% generation %} tags, a default system prompt
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def reference_mask(anchors, keep, S, bs):
    "The DFlash rule written as plain loops."
    B, N = len(anchors), len(anchors[0])
    m = torch.zeros(B, N * bs, S + N * bs, dtype=torch.bool)
    for b in range(B):
        for q in range(N * bs):
            n = q // bs
            for kv in range(S + N * bs):
                if not keep[b][n]:
                    continue
                m[b, q, kv] = (kv < S and kv < anchors[b][n]) or (kv >= S and (kv - S) // bs == n)
    return m


def test_block_mask_matches_reference():
    anchors, keep = [[0, 3, 6], [2, 2, 0]], [[True, True, True], [True, True, False]]
    got = dflash_attention_mask(torch.tensor(anchors), torch.tensor(keep), 8, 3)
    assert torch.equal(got, reference_mask(anchors, keep, 8, 3))
    # context strictly before the anchor: the block at anchor 3 sees positions 0, 1, 2 and not 3
    assert got[0, 3, :8].tolist() == [True, True, True, False, False, False, False, False]


def test_anchors_only_on_supervised_pairs_and_padding_invariant():
    lm = torch.tensor([[0, 0, 1, 1, 1, 0, 1, 1, 0, 1]])
    for seed in range(20):
        a, k = sample_anchors(lm, 3, [seed])
        for p in a[0][k[0]].tolist():
            assert lm[0, p] == 1 and lm[0, p + 1] == 1
    padded = torch.cat([lm, torch.zeros(1, 6, dtype=torch.long)], 1)
    batch = torch.cat([padded, torch.ones(1, 16, dtype=torch.long)])
    a1, k1 = sample_anchors(lm, 8, [5])
    a2, k2 = sample_anchors(batch, 8, [5, 6])
    assert a1[0][k1[0]].tolist() == a2[0][k2[0]].tolist() == [2, 3, 6]


def test_labels_same_position_and_weights_by_hand():
    x = torch.tensor([[10, 11, 12, 13, 14]])
    lm = torch.tensor([[0, 1, 1, 1, 1]])
    blk = dflash_blocks(x, lm, torch.tensor([[1]]), torch.tensor([[True]]), 4, mask_token_id=0)
    assert blk["noise_ids"].tolist() == [[11, 0, 0, 0]] and blk["labels"].tolist() == [[[11, 12, 13, 14]]]
    assert blk["valid"].tolist() == [[[False, True, True, True]]]
    w, den = dflash_position_weights(blk["valid"], "dflash", gamma=4.0)
    assert torch.allclose(w, torch.tensor([[[0.0, 1.0, 0.7788007830714049, 0.6065306597126334]]], dtype=w.dtype))
    q = torch.tensor([[[0.3, 0.5, 0.5, 0.5]]], dtype=torch.float64)
    w, den = dflash_position_weights(blk["valid"], "dpace", q=q, alpha=0.0)
    # alpha = 0: P = (.5, .25, .125); w_j = sum_{m>=j} P_m
    assert torch.allclose(w[0, 0], torch.tensor([0.0, 0.875, 0.375, 0.125], dtype=torch.float64)) and float(den) == 1.0


@pytest.mark.parametrize("template", ["generation", "smollm2"])
def test_assistant_only_loss_mask(template):
    tok = tiny_tokenizer() if template == "generation" else tiny_tokenizer(chat_template=SMOLLM2_TEMPLATE)
    conv = [
        {"role": "user", "content": "What is a dict?"},
        {"role": "assistant", "content": "A mapping."},
        {"role": "user", "content": "Ordered?"},
        {"role": "assistant", "content": "Yes, by insertion."},
    ]
    s = tokenize_conversation(tok, conv)
    assert tok.decode(s["input_ids"][s["loss_mask"].bool()]) == "A mapping.<|im_end|>Yes, by insertion.<|im_end|>"
    if template == "smollm2":
        assert "You are a helpful AI assistant" in tok.decode(s["input_ids"])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    tgt = save_tiny_target_and_chat(d, "qwen3", n=10, answer_chars=400, name="target")
    return tgt, d / "chat.jsonl", d


def _cfg(chat, **kw):
    return tiny_draft_config(chat, **{**TINY_DFLASH, **TINY_STEPS, "seed": 3, "learning_rate": 3e-3, **kw})


def _events(run, kind):
    return [
        json.loads(l) for l in (Path(run) / "events.jsonl").read_text().splitlines() if json.loads(l)["event"] == kind
    ]


def test_online_and_offline_give_the_same_loss(tiny, tmp_path):
    tgt, chat, d = tiny
    on = DraftTrainer(
        _cfg(chat, target_model_path=str(d / "target")),
        tmp_path / "on",
        target=tgt,
        progress=False,
        log=lambda *a: None,
    )
    feats = tmp_path / "feats"
    save_hidden_states(tgt, on.train_set, on.objective.layer_ids, feats, dtype="fp32", shard_size=4, progress=False)
    off = DraftTrainer(
        _cfg(chat, target_model_path=str(d / "target"), train_data_path="", train_hidden_states_path=str(feats)),
        tmp_path / "off",
        progress=False,
        log=lambda *a: None,
    )
    assert off.target is None and len(off.train_set) == len(on.train_set)
    r_on, r_off = logged_step(on), logged_step(off)
    # features computed in differently padded batches differ in the last float bits, hence the tolerance
    assert r_on["loss"] == pytest.approx(r_off["loss"], rel=1e-4)
    # the same anchors and labels: identical supervised counts per slot, and the same per-slot losses
    assert r_on["acc_by_position"] == pytest.approx(r_off["acc_by_position"], abs=1e-9)
    assert r_on["loss_by_position"] == pytest.approx(r_off["loss_by_position"], rel=1e-3)


def test_dataloader_workers_give_the_same_offline_run(tiny, tmp_path):
    """Offline, with `data.dataloader_num_workers=2` worker processes assembling the batches (bf16 features kept in
    bf16 until the device), the losses are those of batches assembled in the training process, also across a resume."""
    tgt, chat, d = tiny
    quiet = dict(progress=False, log=lambda *a: None)
    on = DraftTrainer(_cfg(chat, target_model_path=str(d / "target")), tmp_path / "on", target=tgt, **quiet)
    feats = tmp_path / "feats"
    save_hidden_states(tgt, on.train_set, on.objective.layer_ids, feats, dtype="bf16", shard_size=4, progress=False)
    off = dict(target_model_path=str(d / "target"), train_data_path="", train_hidden_states_path=str(feats))
    losses = {}
    for workers in (0, 2):
        cfg = _cfg(chat, **off, dataloader_num_workers=workers)
        run = tmp_path / f"w{workers}"
        DraftTrainer(cfg, run, max_run_steps=2, **quiet).run()  # killed after 2 steps, then resumed
        DraftTrainer(cfg, run, resume=True, **quiet).run()
        losses[workers] = [e["loss"] for e in _events(run, "train")]
    assert len(losses[0]) >= 4 and losses[2] == losses[0]
    batch = next(DraftTrainer(_cfg(chat, **off), tmp_path / "b", **quiet).micro_batches(0))
    assert batch["hidden_states"].dtype == torch.bfloat16 and batch["input_ids"].device.type == "cpu"


def test_resume_continues_exactly(tiny, tmp_path):
    tgt, chat, _ = tiny
    quiet = dict(target=tgt, progress=False, log=lambda *a: None)
    full = DraftTrainer(_cfg(chat), tmp_path / "full", **quiet)
    full.run()
    part = DraftTrainer(_cfg(chat), tmp_path / "part", max_run_steps=2, **quiet)
    r = part.run()
    assert not r["completed"]
    DraftTrainer(_cfg(chat), tmp_path / "part", resume=True, **quiet).run()
    la = [e["loss"] for e in _events(tmp_path / "full", "train")]
    lb = [e["loss"] for e in _events(tmp_path / "part", "train")]
    assert len(la) == full.total_steps >= 4 and la == lb
    wa = torch.load(full.ckpts.latest(), weights_only=True)["model"]
    wb = torch.load(
        DraftTrainer(_cfg(chat), tmp_path / "part", resume=True, **quiet).ckpts.latest(), weights_only=True
    )["model"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    with pytest.raises(CheckpointError, match="block_size"):
        DraftTrainer(_cfg(chat, block_size=8), tmp_path / "part", resume=True, **quiet)
    # stopped after its start event but before the first save: --resume starts it again from step 0
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    (crashed / "events.jsonl").write_text(
        "".join(l + "\n" for l in (tmp_path / "full" / "events.jsonl").read_text().splitlines()[:1])
    )
    with pytest.raises(CheckpointError, match="already holds a run"):
        DraftTrainer(_cfg(chat), crashed, **quiet)
    DraftTrainer(_cfg(chat), crashed, resume=True, **quiet).run()
    assert [e["event"] for e in map(json.loads, (crashed / "events.jsonl").read_text().splitlines())][:2] == [
        "start",
        "resume",
    ]
    assert [e["loss"] for e in _events(crashed, "train")] == la
    wc = torch.load(DraftTrainer(_cfg(chat), crashed, resume=True, **quiet).ckpts.latest(), weights_only=True)["model"]
    assert all(torch.equal(wa[k], wc[k]) for k in wa)
    with pytest.raises(CheckpointError, match="another target"):
        DraftTrainer(
            _cfg(chat),
            tmp_path / "part",
            resume=True,
            target=tiny_target("llama", num_layers=5),
            progress=False,
            log=lambda *a: None,
        )
    # the same architecture with other weights (a base model against its Instruct version) is another target too
    twin = tiny_target("qwen3", num_layers=5, seed=7)
    with pytest.raises(CheckpointError, match="other architecture or weights"):
        DraftTrainer(_cfg(chat), tmp_path / "part", resume=True, target=twin, progress=False, log=lambda *a: None)


def test_bad_inputs(tiny, tmp_path):
    tgt, chat, d = tiny
    with pytest.raises(TargetError, match="ids run from 0 to 4"):
        tgt(torch.tensor([[1, 2]]), layer_ids=[7])
    with pytest.raises(DFlashError, match="out of range"):
        DFlashConfig.from_target(tgt.config, 0, target_layer_ids=[9])
    with pytest.raises(DFlashError, match="outside the target's vocabulary"):
        resolve_mask_token_id("99999", tgt.tokenizer, tgt.vocab_size)
    with pytest.raises(DFlashError, match="outside the target vocabulary"):
        DFlashConfig.from_target(tgt.config, mask_token_id=tgt.vocab_size + 5)
    (tmp_path / "noasst.jsonl").write_text('{"conversations": [{"role": "user", "content": "hi"}]}\n')
    with pytest.raises(ChatDataError, match="no conversation"):
        load_conversations(tmp_path / "noasst.jsonl")
    plain = tiny_tokenizer(chat_template="{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    with pytest.raises(ChatDataError, match="assistant"):
        tokenize_conversation(plain, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    # a block size the data cannot fill: every sample has fewer than 2 x block size supervised tokens
    with pytest.raises(ChatDataError, match="--block-size"):
        DraftTrainer(_cfg(chat, block_size=512), tmp_path / "big", target=tgt, progress=False, log=lambda *a: None)
    feats = tmp_path / "f"
    data = build_chat_dataset(chat, tgt.tokenizer, 128)
    save_hidden_states(tgt, data[:3], [0, 1], feats, dtype="fp32", progress=False)
    with pytest.raises(FeaturesError, match="--layers"):
        HiddenStates(feats).check([1, 3])
    HiddenStates(feats).check([0, 1], tgt.digest())
    with pytest.raises(FeaturesError, match="other architecture or other weights"):  # same shape, other weights
        HiddenStates(feats).check([0, 1], tiny_target("qwen3", num_layers=5, seed=7).digest())
    with pytest.raises(FeaturesError, match="--layers"):
        DraftTrainer(
            _cfg(chat, train_data_path="", train_hidden_states_path=str(feats)),
            tmp_path / "o",
            target=tgt,
            progress=False,
            log=lambda *a: None,
        )


def test_structured_backend_trains_like_sdpa(tiny, tmp_path):
    """The structured attention gives the dense path's loss and gradients on a real batch (drops and edge anchors
    included)."""
    tgt, chat, _ = tiny
    quiet = dict(target=tgt, progress=False, log=lambda *a: None)
    res = {}
    for be in ("sdpa", "structured"):
        torch.manual_seed(0)
        tr = DraftTrainer(_cfg(chat, attention_backend=be), tmp_path / be, **quiet)
        grads = []
        tr.optimizer.step = lambda *a, **k: grads.append(
            [p.grad.clone() for p in tr.model.parameters() if p.grad is not None]
        )
        res[be] = (logged_step(tr), grads[0])
    (ra, ga), (rb, gb) = res["sdpa"], res["structured"]
    assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5) and len(ga) == len(gb) > 0
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in zip(ga, gb))  # the same gradients


def test_flex_attention_on_a_cpu_gives_the_sdpa_loss_and_refuses_to_train(tiny, tmp_path):
    "On a CPU flex_attention runs PyTorch's reference path (no backward there): the same loss, and a clear refusal."
    from mdlm_kit.core.config import ConfigError
    from mdlm_kit.drafts.dflash import dflash_forward, sample_anchors

    tgt, chat, _ = tiny
    quiet = dict(target=tgt, progress=False, log=lambda *a: None)
    tr = DraftTrainer(_cfg(chat), tmp_path / "a", **quiet)
    idx, seeds = tr.micro_batch(0)
    ids, lm, hid, _, _ = tr.batch(tr.train_set, idx)
    anchors, keep = sample_anchors(lm, tr.cfg.dflash.num_anchors, seeds)
    keep = keep.clone()
    keep[0, 1] = False  # a dropped block: its rows attend to nothing
    with torch.no_grad():
        out = {
            b: dflash_forward(tr.model, tr.tables, ids, lm, hid, anchors, keep, backend=b)
            for b in ("sdpa", "flex_attention")
        }
    assert torch.isfinite(out["flex_attention"]["numerator"])
    assert float(out["flex_attention"]["numerator"]) == pytest.approx(float(out["sdpa"]["numerator"]), rel=1e-5)
    with pytest.raises(ConfigError, match="cannot train on a CPU.*--attention-backend sdpa"):
        DraftTrainer(_cfg(chat, attention_backend="flex_attention"), tmp_path / "b", **quiet)


def test_saved_drafter_has_the_reference_layout_and_the_first_layout_is_refused(tmp_path):
    """Names and config fields the DFlash reference loader reads (z-lab/dflash model/dflash.py at a3516f8: a
    Qwen3PreTrainedModel with fc, hidden_norm, norm, layers.i.{input,post_attention}_layernorm,
    layers.i.self_attn.{q,k,v,o}_proj and {q,k}_norm, layers.i.mlp.{gate,up,down}_proj; config.block_size,
    num_target_layers, dflash_config.{mask_token_id,target_layer_ids})."""
    from safetensors import safe_open
    from safetensors.torch import save_file
    from transformers import Qwen3Config
    from mdlm_kit.drafts.dflash import DFlashDraftModel

    tgt = tiny_target("qwen3", num_layers=6)
    torch.manual_seed(0)
    d = DFlashDraftModel(
        DFlashConfig.from_target(tgt.config, mask_token_id=5, block_size=4, num_feature_layers=2, num_draft_layers=2)
    )
    d.save_pretrained(tmp_path / "ref")
    with safe_open(str(tmp_path / "ref" / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    per_layer = [
        "input_layernorm",
        "post_attention_layernorm",
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
        "self_attn.o_proj",
        "self_attn.q_norm",
        "self_attn.k_norm",
        "mlp.gate_proj",
        "mlp.up_proj",
        "mlp.down_proj",
    ]
    expected = {"fc.weight", "hidden_norm.weight", "norm.weight"} | {
        f"layers.{i}.{n}.weight" for i in range(2) for n in per_layer
    }
    assert names == expected
    c = Qwen3Config.from_pretrained(tmp_path / "ref")  # the reference builds its model from this config
    assert (c.block_size, c.num_target_layers, c.num_hidden_layers) == (4, 6, 2)
    assert c.dflash_config == {"mask_token_id": 5, "target_layer_ids": d.config.target_layer_ids}
    assert c.rope_parameters["rope_theta"] == tgt.config.rope_parameters["rope_theta"]
    # the kit's first layout (model_type mdlm_kit_dflash, flat fields, MLP w1/w3/w2) is refused with the fix, not read
    old = tmp_path / "old"
    old.mkdir()
    sd = {
        k.replace(".mlp.gate_proj.", ".mlp.w1.")
        .replace(".mlp.up_proj.", ".mlp.w3.")
        .replace(".mlp.down_proj.", ".mlp.w2."): v
        for k, v in d.state_dict().items()
        if not k.startswith("rotary.")
    }
    save_file({k: v.contiguous() for k, v in sd.items()}, str(old / "model.safetensors"))
    from dataclasses import asdict

    (old / "config.json").write_text(
        json.dumps({"model_type": "mdlm_kit_dflash", "architectures": ["DFlashDraftModel"], **asdict(d.config)})
    )
    with pytest.raises(CheckpointError, match=r"unexpected \['layers\.0\.mlp\.w1\.weight'.*earlier version of the kit"):
        DFlashDraftModel.from_pretrained(old)


def test_a_drafter_owned_mask_row_is_saved_with_a_note_naming_the_fix(tmp_path, capsys):
    """A mask row past the target's vocabulary (what --mask-token-id auto gives when the tokenizer fills it, as
    SmolLM2's does) loads back in the kit, and saving it says once that reference loaders cannot index it, and why."""
    from mdlm_kit.core import device
    from mdlm_kit.drafts.dflash import DFlashConfig, DFlashDraftModel

    device._NOTED.clear()
    owned = DFlashDraftModel(DFlashConfig(target_layer_ids=[0], vocab_size=10, mask_token_id=10))
    assert owned.mask_embedding is not None
    owned.save_pretrained(tmp_path / "a")
    owned.save_pretrained(tmp_path / "b")
    err = capsys.readouterr().err
    assert err.count("owns its mask row (id 10") == 1 and "--mask-token-id set to a token" in err, err
    assert DFlashDraftModel.from_pretrained(tmp_path / "a").mask_embedding is not None
    DFlashDraftModel(DFlashConfig(target_layer_ids=[0], vocab_size=10, mask_token_id=3)).save_pretrained(tmp_path / "c")
    assert "mask row" not in capsys.readouterr().err  # a row of the target's own: nothing to say


def _flex_compiles(monkeypatch, lengths, n_anchors: int) -> int:
    "Compilations (Dynamo frames) of DFlash's compiled flex path over batches of these lengths, forward only."
    from torch._dynamo.testing import CompileCounter
    import mdlm_kit.drafts.dflash as dflash
    from mdlm_kit.drafts.dflash import DFlashDraftModel, dflash_forward
    from mdlm_kit.drafts.targets import TargetEmbeddingsAndHead

    counter = CompileCounter()  # counts what Dynamo compiles, then runs it eagerly (no kernel compilation)
    monkeypatch.setattr(dflash, "FLEX_COMPILED_ON", {"cpu"})
    monkeypatch.setattr(dflash, "FLEX_COMPILE_BACKEND", counter)
    monkeypatch.setattr(dflash, "_FLEX", {})
    torch._dynamo.reset()
    tgt = tiny_target("qwen3", num_layers=6)
    torch.manual_seed(0)
    cfg = DFlashConfig.from_target(tgt.config, mask_token_id=5, block_size=4, num_feature_layers=2)
    draft, tables = DFlashDraftModel(cfg), TargetEmbeddingsAndHead(torch.randn(tgt.config.vocab_size, cfg.hidden_size))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for i, S in enumerate(lengths):
            ids = torch.randint(6, tgt.config.vocab_size, (2, S), generator=g, device="cpu")
            lm = (torch.rand(2, S, generator=g, device="cpu") < 0.7).long()
            lm[:, :2] = 1  # at least one anchor
            hid = torch.randn(2, S, 2 * cfg.hidden_size, generator=g, device="cpu")
            anchors, keep = sample_anchors(lm, 8, [i, i + 1])
            out = dflash_forward(
                draft, tables, ids, lm, hid, anchors, keep, backend="flex_attention", n_anchors=n_anchors
            )
            assert torch.isfinite(out["numerator"])
    return counter.frame_count


def test_compiled_flex_attention_compiles_once_per_length_bucket(monkeypatch):
    """Issue 44: over 50 batches of mixed lengths (and anchor counts), the compiled attention and block mask compile
    once per length bucket, not once per batch (where Dynamo's recompile limit would drop them to the dense path)."""
    from mdlm_kit.drafts.dflash import bucket_length

    lengths = [int(x) for x in torch.randint(6, 300, (50,), generator=torch.Generator().manual_seed(1))]
    buckets = {bucket_length(S) for S in lengths}
    assert buckets == {128, 256, 512}
    assert _flex_compiles(monkeypatch, lengths, n_anchors=8) <= 2 * len(buckets)  # attention + mask, per bucket
    assert _flex_compiles(monkeypatch, lengths[:6], n_anchors=0) > 2 * len(buckets)  # unpadded: a shape a batch


def test_padding_to_a_bucket_changes_no_loss(tiny):
    "The padded batch (a longer sequence, dropped blocks) gives the loss and metrics of the batch as it is."
    from mdlm_kit.drafts.dflash import DFlashDraftModel, dflash_forward, pad_to_buckets
    from mdlm_kit.drafts.targets import TargetEmbeddingsAndHead

    tgt = tiny_target("qwen3", num_layers=6)
    torch.manual_seed(0)
    cfg = DFlashConfig.from_target(tgt.config, mask_token_id=5, block_size=4, num_feature_layers=2)
    draft, tables = DFlashDraftModel(cfg), TargetEmbeddingsAndHead(torch.randn(tgt.config.vocab_size, cfg.hidden_size))
    ids = torch.randint(6, tgt.config.vocab_size, (2, 37), device="cpu")
    lm = torch.ones(2, 37, dtype=torch.long, device="cpu")
    hid = torch.randn(2, 37, 2 * cfg.hidden_size, device="cpu")
    anchors, keep = sample_anchors(lm, 5, [1, 2])
    padded = pad_to_buckets(ids, lm, hid, anchors, keep, 9)
    assert [tuple(t.shape) for t in padded] == [(2, 128), (2, 128), (2, 128, 2 * cfg.hidden_size), (2, 9), (2, 9)]
    with torch.no_grad():
        a = dflash_forward(draft, tables, ids, lm, hid, anchors, keep, backend="sdpa")
        b = dflash_forward(draft, tables, *padded, backend="sdpa")
    assert float(a["numerator"]) == pytest.approx(float(b["numerator"]), rel=1e-5)
    assert float(a["denominator"]) == float(b["denominator"])
    assert torch.allclose(a["pos_correct"], b["pos_correct"]) and float(a["n_blocks"]) == float(b["n_blocks"])
