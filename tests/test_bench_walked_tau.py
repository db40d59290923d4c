"""`bench/walked_tau.py`: the counts behind lesson 22's "What limits tau", by hand."""

import json, sys
from pathlib import Path
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import walked_tau


class _Draft:
    "A drafter stand-in: only its draft vocabulary."

    def __init__(self, ids):
        self.ids = torch.tensor(ids)

    def draft_ids(self):
        return self.ids


def test_vocab_counts_the_token_each_start_drafts_first():
    ids = torch.tensor([[10, 11, 12, 13, 14]])
    lm = torch.tensor([[1, 1, 0, 1, 0]])  # starts at 0 and 1 draft tokens 2 and 3; a start at 3 has nothing to draft
    agg = {}
    walked_tau._vocab(agg, _Draft([12, 40]), ids, lm, torch.tensor([13, 50]))
    assert agg == {"drafted": 2, "in_vocab": 1, "seen": 1}
    walked_tau._vocab(agg, _Draft([12, 13]), ids, lm, None)  # no training answers: nothing counted as seen
    assert agg == {"drafted": 4, "in_vocab": 3, "seen": 1}


def test_answer_tokens_reads_assistant_turns_only(tmp_path):
    from mdlm_kit.drafts.targets import tiny_target

    tok = tiny_target("llama", num_layers=1).tokenizer
    rows = [
        {"conversations": [{"role": "user", "content": "zzz"}, {"role": "assistant", "content": "ab"}]},
        {"conversations": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "ba c"}]},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    want = sorted(
        set(tok("ab", add_special_tokens=False)["input_ids"] + tok("ba c", add_special_tokens=False)["input_ids"])
    )
    got = walked_tau.answer_tokens(tok, str(path))
    assert got.tolist() == want
    assert not set(tok("zzz", add_special_tokens=False)["input_ids"]) & set(want)  # the user's turn is not read
