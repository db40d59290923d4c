"""`bench/eagle3_step.py` on a tiny target: both ways of an EAGLE-3 step are timed on the same batches, and on fp32
features (where the saved top-1 and the recomputed argmax agree) they give the same losses."""

import json, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import eagle3_step


def test_both_ways_timed_with_the_same_losses(tmp_path, monkeypatch):
    from mdlm_kit.drafts.features import save_hidden_states
    from mdlm_kit.drafts.targets import tiny_target
    from mdlm_kit.drafts.chat_data import topics_chat
    from mdlm_kit.drafts.chat_data import build_chat_dataset

    tgt = tiny_target("llama", num_layers=6)
    tgt.model.save_pretrained(tmp_path / "target")
    tgt.tokenizer.save_pretrained(tmp_path / "target")
    chat = topics_chat(tmp_path / "chat.jsonl", n=8, answer_chars=200)
    data = build_chat_dataset(str(chat), tgt.tokenizer, 96, min_loss_tokens=2)
    save_hidden_states(tgt, data, [1, 2, 3, 5], tmp_path / "feats/train", dtype="fp32", progress=False)
    out = tmp_path / "step.json"
    argv = ["eagle3_step.py", "--features", str(tmp_path / "feats"), "--target", str(tmp_path / "target")]
    argv += ["--layers", "1,2,3", "--batches", "2", "--rounds", "2", "--output", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    eagle3_step.main()
    r = json.loads(out.read_text())
    assert set(r["seconds_per_step"]) == {"whole head", "saved top-1"}
    assert all(s > 0 for s in r["seconds_per_step"].values())
    assert len(r["loss"]["whole head"]) == 2
    assert r["loss"]["whole head"] == r["loss"]["saved top-1"]  # rounded to 5 digits
    differ, total = map(int, r["labels_differ"].split("/"))
    assert differ == 0 and total > 0
