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


def test_the_full_check_trains_gpu_small_as_shipped(tmp_path):
    """Without --quick the MDLM runs are configs/gpu_small.toml as shipped (90 M parameters, its batch), on the
    embedded corpus (the device machines reach no hub), eager and compiled without dropout so their losses compare."""
    import argparse
    from mdlm_kit.cli.main import build_config, make_parser

    a = argparse.Namespace(quick=False, device="cuda", precision="auto", mdlm_steps=60)
    for extra, compiled in ((gpu_check.EAGER, False), (gpu_check.COMPILED, True)):
        cmd = gpu_check.mdlm_args(a, tmp_path, tmp_path / "run", extra)
        cfg = build_config(make_parser().parse_args([str(c) for c in cmd[cmd.index("train") :]]))
        assert (cfg.model.n_layer, cfg.model.d_model, cfg.data.block_size) == (12, 768, 512)
        assert (cfg.training.batch_size, cfg.training.gradient_accumulation_steps) == (32, 4)
        assert (cfg.data.corpus, cfg.training.max_steps, cfg.training.compile) == ("embedded", 60, compiled)
        assert cfg.model.dropout == 0.0 and cfg.forbid_math_sdpa is True
