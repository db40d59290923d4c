"""`bench/target_quality.py`: perplexity and greedy answers of a target by decoding precision, on a tiny target."""

import json, sys
import pytest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import target_quality


def test_first_difference_by_hand():
    assert target_quality.first_difference([1, 2, 3], [1, 2, 4]) == 2
    assert target_quality.first_difference([1, 2], [1, 2, 3]) == 2  # one answer is the other's start
    assert target_quality.first_difference([5], [6]) == 0


def test_fp32_is_its_own_reference_and_int8_runs(tmp_path, monkeypatch):
    from mdlm_kit.core.layers import int8_lacks, int8_linear_available
    from mdlm_kit.drafts.targets import tiny_target

    if not int8_linear_available():
        pytest.skip(f"int8 does not run here: {int8_lacks()}")
    tgt = tiny_target("llama", num_layers=2)
    tgt.model.save_pretrained(tmp_path / "target")
    tgt.tokenizer.save_pretrained(tmp_path / "target")
    out = tmp_path / "q.json"
    argv = ["target_quality.py", "--target", str(tmp_path / "target"), "--precisions", "fp32,int8", "--windows", "2"]
    argv += ["--window", "32", "--num-prompts", "2", "--max-new-tokens", "8", "--output", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    target_quality.main()
    r = json.loads(out.read_text())
    assert r["fp32"]["answers_equal_to_fp32"] == r["fp32"]["answers"] == 2
    assert r["fp32"]["text_tokens"] == r["int8"]["text_tokens"] == 64
    assert 1 < r["fp32"]["perplexity"] < 1e6 and 1 < r["int8"]["perplexity"] < 1e6
    monkeypatch.setattr(sys, "argv", argv[:4] + ["int8,fp32"] + argv[5:])
    with pytest.raises(SystemExit, match="must start with fp32"):
        target_quality.main()
