"The seed scripts' command lines and files: flags spelled their way, SpecForge draft configs, template names, refusals."

import json
import pytest
from conftest import tiny_draft_config
from mdlm_kit.cli.drafts import config_from_args
from mdlm_kit.cli.main import main, make_parser
from mdlm_kit.drafts.train import DraftTrainer
from mdlm_kit.drafts.eagle3 import default_aux_layer_ids
from mdlm_kit.drafts.targets import LLAMA3_TEMPLATE


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from conftest import save_tiny_target_and_chat

    d = tmp_path_factory.mktemp("seed")
    return save_tiny_target_and_chat(d, "qwen3"), d


def _specforge_config(tgt, **extra) -> dict:
    """A draft config in SpecForge's layout (as in its configs/qwen3-*-eagle3.json and -dflash.json), sized for the tiny
    target."""
    c = tgt.config
    return {
        "architectures": ["X"],
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "head_dim": c.head_dim,
        "rms_norm_eps": 1e-6,
        "rope_scaling": None,
        "rope_theta": 1000000,
        "max_position_embeddings": 4096,
        "vocab_size": c.vocab_size,
        "tie_word_embeddings": False,
        **extra,
    }


def _trainer(setup, tmp_path, algorithm, **kw):
    tgt, d = setup
    run = {"target_model_path": str(d / "t"), "max_steps": 1, "save_interval": 100}
    own = {"dflash": {"block_size": 4, "num_anchors": 4}, "eagle3": {"ttt_length": 2}}[algorithm]
    cfg = tiny_draft_config(d / "chat.jsonl", algorithm, **{**run, **own, **kw})
    return DraftTrainer(cfg, tmp_path / "run", algorithm=algorithm, target=tgt, progress=False, log=lambda *a: None)


def test_specforge_eagle3_config_keeps_its_rope_and_takes_layers_from_the_target(setup, tmp_path):
    tgt, _ = setup
    p = tmp_path / "eagle3.json"
    p.write_text(
        json.dumps(
            _specforge_config(tgt, architectures=["LlamaForCausalLMEagle3"], num_hidden_layers=1, draft_vocab_size=64)
        )
    )
    c = _trainer(setup, tmp_path, "eagle3", draft_config_path=str(p)).model.config
    assert c.rope_parameters["rope_theta"] == 1000000  # not the 10000 default
    assert c.eagle_aux_hidden_state_layer_ids == default_aux_layer_ids(5) and c.num_target_layers == 5
    assert (c.draft_vocab_size, c.max_position_embeddings) == (64, 4096)


def test_specforge_dflash_config_reads_the_nested_dflash_block(setup, tmp_path):
    tgt, _ = setup
    p = tmp_path / "dflash.json"
    p.write_text(
        json.dumps(
            _specforge_config(
                tgt,
                architectures=["DFlashDraftModel"],
                num_hidden_layers=2,
                block_size=4,
                num_target_layers=5,
                dflash_config={"mask_token_id": 3, "target_layer_ids": [1, 3]},
            )
        )
    )
    tr = _trainer(setup, tmp_path, "dflash", draft_config_path=str(p))
    c = tr.model.config
    assert (c.mask_token_id, c.target_layer_ids, c.num_hidden_layers, len(tr.model.layers)) == (3, [1, 3], 2, 2)
    assert c.rope_parameters["rope_theta"] == 1000000
    tr.run()  # and it trains
    p.write_text(json.dumps(_specforge_config(tgt, num_target_layers=36, block_size=4)))
    with pytest.raises(Exception, match="num_target_layers = 36; this target has 5"):
        _trainer(setup, tmp_path / "b", "dflash", draft_config_path=str(p))


def test_seed_flag_spellings_and_template_names(setup, tmp_path, capsys):
    tgt, d = setup
    ap = make_parser()
    for algo in ("dflash", "eagle3"):
        a = ap.parse_args(
            [
                f"train-{algo}",
                "--output-dir",
                "x",
                "--accumulation-steps",
                "3",
                "--draft-model-config",
                "c.json",
                "--trust-remote-code",
                "--cache-dir",
                "cache",
                "--optimizer-type",
                "adamw_8bit",
            ]
        )
        c = config_from_args(a, algo)  # the spellings reach the settings
        assert (c.training.gradient_accumulation_steps, c.model.draft_config_path) == (3, "c.json")
        assert (c.target.trust_remote_code, c.data.cache_dir) == (True, "cache")
        assert c.training.optimizer == "adamw_8bit"  # the kit's earlier spelling of --optimizer
    old = tgt.tokenizer.chat_template
    try:
        _trainer(setup, tmp_path, "eagle3", chat_template="llama3", cache_dir=str(tmp_path / "cache"))
        assert tgt.tokenizer.chat_template == LLAMA3_TEMPLATE
    finally:
        tgt.tokenizer.chat_template = old
    assert any((tmp_path / "cache").glob("vocab-*.pt"))  # the draft vocabulary went to --cache-dir


def test_sglang_backend_is_refused_with_a_message(setup, tmp_path, capsys):
    _, d = setup
    rc = main(
        [
            "train-dflash",
            "--output-dir",
            str(tmp_path / "r"),
            "--target-model-path",
            str(d / "t"),
            "--train-data-path",
            str(d / "chat.jsonl"),
            "--target-model-backend",
            "sglang",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "sglang" in err and "not supported" in err and not (tmp_path / "r" / "checkpoints").exists()


def test_a_checkpoint_from_an_earlier_kit_is_refused_with_the_reason(setup, tmp_path):
    """Runs saved with one flat dict of settings (before the sections), or with a setting under an old name, are
    refused with the reason named; the checkpoint itself is left as it was."""
    from mdlm_kit.core.loop import ResumeError

    tr = _trainer(setup, tmp_path, "dflash")
    tr.run()
    state = tr.ckpts.load(tr.ckpts.latest())

    def resume():
        return DraftTrainer(tr.cfg, tr.out, "dflash", resume=True, target=setup[0], progress=False, log=print)

    assert resume().step == tr.step == 1  # the run's own checkpoint resumes
    flat = dict(state, config=tr.cfg.flat())
    tr.ckpts.save(flat, state["step"])
    with pytest.raises(ResumeError, match="saved by an earlier version of the kit"):
        resume()
    old = json.loads(json.dumps(state["config"]))
    old["training"]["optimizer_type"] = old["training"].pop("optimizer")
    tr.ckpts.save(dict(state, config=old), state["step"])
    with pytest.raises(ResumeError, match="training.optimizer: not a setting any more|training.optimizer_type"):
        resume()
    old["training"]["optimizer"] = old["training"].pop("optimizer_type")
    old["training"]["learning_rate"] *= 2  # a real difference is refused too
    tr.ckpts.save(dict(state, config=old), state["step"])
    with pytest.raises(ResumeError, match="learning_rate"):
        resume()
