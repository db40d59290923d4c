"""A GGUF target is converted once into the kit's cache (lesson 14, `converted_gguf`): the copy is the same model, and a
conversion that fails leaves nothing behind."""

import hashlib
import pytest
import torch
import transformers
import safetensors.torch


@pytest.fixture
def fake_gguf(tmp_path, monkeypatch):
    "A file named .gguf and transformers' GGUF readers replaced by a tiny model and tokenizer (no real GGUF needed)."
    from mdlm_kit.drafts.targets import tiny_target

    tiny = tiny_target("llama")
    (tmp_path / "m.gguf").write_bytes(b"GGUF stand-in")
    monkeypatch.setenv("MDLM_KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: tiny.model)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: tiny.tokenizer)
    return tmp_path, tiny


def test_converted_once_into_a_directory_that_loads_the_same_model(fake_gguf, monkeypatch):
    from mdlm_kit.drafts.targets import TargetModel, converted_gguf

    tmp, tiny = fake_gguf
    d = converted_gguf(str(tmp), "m.gguf")
    sha = hashlib.sha256(b"GGUF stand-in").hexdigest()
    assert d == tmp / "cache" / "gguf" / f"m-{sha[:16]}"
    assert sorted(p.name for p in (tmp / "cache" / "gguf").iterdir()) == [d.name]  # no temporary folder left
    assert {"config.json", "model.safetensors", "source.json", "tokenizer.json"} <= {p.name for p in d.iterdir()}
    # the second call reads the directory: transformers' GGUF reader is not called again
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", None)
    assert converted_gguf(str(tmp), "m.gguf") == d
    monkeypatch.undo()
    back = TargetModel.from_pretrained(d)
    ids = torch.tensor([[3, 7, 11, 5]])
    theirs = tiny.model.state_dict()
    assert all(torch.equal(v, theirs[k]) for k, v in back.model.state_dict().items()) and back.digest() == tiny.digest()
    # (the attention kernel transformers picks for a loaded model may round differently from the one built in memory)
    torch.testing.assert_close(back(ids).logits, tiny(ids).logits, rtol=0, atol=1e-5)


def test_a_failed_conversion_leaves_nothing(fake_gguf, monkeypatch):
    from mdlm_kit.drafts.targets import converted_gguf

    tmp, _ = fake_gguf

    def full_disk(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safetensors.torch, "save_file", full_disk)
    with pytest.raises(OSError, match="No space left"):
        converted_gguf(str(tmp), "m.gguf")
    assert list((tmp / "cache" / "gguf").iterdir()) == []


@pytest.mark.slow
def test_smollm2_from_the_cache_is_smollm2_from_its_gguf():
    "The cached copy against transformers' own `gguf_file=` load: the same weights, digest, tokenizer and logits."
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from mdlm_kit.drafts.targets import TargetModel, resolve_target

    path, gguf = resolve_target("smollm2")
    direct = TargetModel(
        AutoModelForCausalLM.from_pretrained(path, gguf_file=gguf, dtype=torch.float32),
        AutoTokenizer.from_pretrained(path, gguf_file=gguf),
    )
    cached = TargetModel.from_pretrained("smollm2")
    msgs = [{"role": "user", "content": "What does yield do in Python? Ünïcode too."}]
    ids = [
        t.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
        for t in (direct, cached)
    ]
    assert ids[0] == ids[1] and cached.tokenizer.eos_token_id == direct.tokenizer.eos_token_id
    assert cached.digest() == direct.digest()
    x = torch.tensor([ids[0]])
    assert torch.equal(cached(x).logits, direct(x).logits)
