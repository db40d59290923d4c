"""Exports others can load (issue 44): a saved MDLM and a saved DFlash drafter carry their code beside their weights,
written from the kit's own source, and transformers' Auto classes load them with `trust_remote_code=True` in a
process where the kit cannot be imported, giving the kit's outputs."""

import json
import subprocess
import sys

import torch
from mdlm_kit.core.config import ModelConfig
from mdlm_kit.drafts.dflash import DFlashConfig, DFlashDraftModel, dflash_attention_mask
from mdlm_kit.drafts.targets import tiny_target
from mdlm_kit.mdlm.model import DiffusionTransformer

NO_KIT = "import sys; sys.modules['mdlm_kit'] = None  # the kit cannot be imported here\n"


def _without_the_kit(tmp_path, code: str):
    "Run `code` in a fresh Python where `import mdlm_kit` fails; transformers' module cache under tmp_path."
    env = {"HF_MODULES_CACHE": str(tmp_path / "hf_modules"), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-c", NO_KIT + code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def test_an_mdlm_loads_with_automodelformaskedlm_without_the_kit(tmp_path):
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=60, n_layer=2, n_head=2, d_model=32, max_seq_len=24, mask_token_id=3, local_mixing=1)
    m = DiffusionTransformer(cfg).eval()
    m.save_pretrained(tmp_path / "m", dtype=torch.float32)
    assert json.loads((tmp_path / "m" / "config.json").read_text())["auto_map"]["AutoModelForMaskedLM"]
    x = torch.randint(4, 60, (2, 20), generator=torch.Generator().manual_seed(1))
    torch.save(x, tmp_path / "x.pt")
    _without_the_kit(
        tmp_path,
        f"""
import torch
from transformers import AutoModelForMaskedLM
hf = AutoModelForMaskedLM.from_pretrained({str(tmp_path / "m")!r}, trust_remote_code=True, dtype=torch.float32)
x = torch.load({str(tmp_path / "x.pt")!r})
with torch.no_grad():
    torch.save(hf(x).logits, {str(tmp_path / "hf.pt")!r})
""",
    )
    with torch.no_grad():
        torch.testing.assert_close(torch.load(tmp_path / "hf.pt"), m(x))


def test_a_dflash_drafter_loads_with_automodel_without_the_kit(tmp_path):
    tgt = tiny_target("qwen3", num_layers=6)
    torch.manual_seed(0)
    draft = DFlashDraftModel(DFlashConfig.from_target(tgt.config, mask_token_id=5, block_size=4, num_feature_layers=2))
    draft.eval().save_pretrained(tmp_path / "d", dtype=torch.float32)
    H, S = draft.config.hidden_size, 9
    inputs = {
        "e": torch.randn(1, 8, H),
        "hid": torch.randn(1, S, 2 * H),
        "pos": torch.cat([torch.arange(S), torch.tensor([2, 3, 4, 5, 6, 7, 8, 9])])[None],
        "mask": dflash_attention_mask(torch.tensor([[2, 6]]), torch.tensor([[True, True]]), S, 4),
    }
    torch.save(inputs, tmp_path / "in.pt")
    _without_the_kit(
        tmp_path,
        f"""
import torch
from transformers import AutoModel
hf = AutoModel.from_pretrained({str(tmp_path / "d")!r}, trust_remote_code=True, dtype=torch.float32).eval()
i = torch.load({str(tmp_path / "in.pt")!r})
with torch.no_grad():
    torch.save(hf(i["e"], i["hid"], i["pos"], i["mask"]), {str(tmp_path / "hf.pt")!r})
""",
    )
    with torch.no_grad():
        want = draft(inputs["e"], inputs["hid"], inputs["pos"], inputs["mask"])
    torch.testing.assert_close(torch.load(tmp_path / "hf.pt"), want, rtol=1e-5, atol=1e-5)
