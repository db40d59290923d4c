"""`bench/answer_repeats.py`: which answer tokens repeat a bigram seen before, on hand-checkable sequences."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import answer_repeats


def test_bigram_seen_by_hand():
    # prompt 1 2 3; answer 1 2 1 2 3: (3,1) new, (1,2) in the prompt, (2,1) new, then (1,2) and (2,3) seen
    assert answer_repeats.bigram_seen([1, 2, 3], [1, 2, 1, 2, 3]) == [False, True, False, True, True]
    assert answer_repeats.bigram_seen([], [5, 5, 5]) == [False, False, True]  # (5,5) first made by the 2nd and 3rd
    assert answer_repeats.bigram_seen([7], []) == []


def test_shares_split_early_and_late():
    got = answer_repeats.shares([[False, True, True, True], [False, False, True]], split=2)
    assert got == {"early_tokens": 4, "late_tokens": 3, "early_repeat_share": 0.25, "late_repeat_share": 1.0}
    assert answer_repeats.shares([[True]], split=2)["late_repeat_share"] is None
