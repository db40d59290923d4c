"The prepared device check (tools/gpu_check.py) runs end to"

"end here, on a tiny target, so it is ready when a GPU is lent."

import json, sys
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gpu_check  # noqa: E402


@pytest.mark.slow
def test_gpu_check_quick_on_cpu(tmp_path):
    gpu_check.main(
        [
            "--quick",
            "--device",
            "cpu",
            "--only",
            "env,attention_exact,dflash_attention,drafters,speculate",
            "--out",
            str(tmp_path),
        ]
    )
    s = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [k for k in s] == ["env", "attention_exact", "dflash_attention", "drafters", "speculate"] and all(
        v["ok"] for v in s.values()
    ), s
    assert s["drafters"]["dflash_backends_max_rel_diff"] < 1e-3  # sdpa and structured: the same losses
    assert s["speculate"]["dflash"]["lossless"] is True and s["speculate"]["eagle3"]["lossless"] is True


def test_attention_check_catches_a_one_off_mask(tmp_path):
    "The exactness check passes the real backends and its control shows a wrong mask is far outside its tolerance."
    import argparse

    out = gpu_check.check_attention_exact(argparse.Namespace(device="cpu"), tmp_path)
    assert out["sdpa"] < 1e-5 and out["structured"] < 1e-5 and out["one_off_mask"] > 0.1, out
