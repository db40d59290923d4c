"""Every CPU the kit runs on: the CPU fast paths are chosen by one probe (`cpu_features`, lesson 02), and where a CPU
lacks what a path needs the plain path runs with the same results. The probe's input is replaced (`MDLM_KIT_CPU`), so
these run on any machine; `ONEDNN_MAX_CPU_ISA=AVX2` makes oneDNN itself refuse what an AVX2 laptop's oneDNN refuses."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import ARM64_CPU, simulated_cpu_env

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _env(extra: dict) -> dict:
    return simulated_cpu_env(extra) | {"MPLBACKEND": "Agg"}


# the names through which a lesson reaches a choice the probe makes (lesson 02): the arm64 simulation changes nothing
# but the probe's answer (ATen's kernels stay this machine's), so a lesson that names none of these runs the same code
# under it as in the JupyterLab run. Measured by logging every question put to the probe while each lesson ran alone
# under the arm64 simulation (2026-12-06): 02, 08, 14, 21 and 29 asked; the names below also pick 15, 25 and 26.
PROBE_NAMES = (
    "cpu_features",
    "cpu_supports_bf16",
    "simulated_cpu",
    "inference_precision",
    "decoding_target",
    "int8_linear",
    "packed_linear_available",
    "choose_products",
    "PackedLinear",
    "Int8RowsLinear",
    "draft_precision",
    "DecodeSettings",
    "prepare_decoding",
)


def probe_lessons() -> list[str]:
    "The lessons whose code names a choice the CPU probe makes (`PROBE_NAMES`)."
    pat = re.compile(r"\b(" + "|".join(PROBE_NAMES) + r")\b")
    out = []
    for p in sorted((ROOT / "nbs").glob("[0-9]*.ipynb")):
        cells = json.loads(p.read_text())["cells"]
        if any(c["cell_type"] == "code" and pat.search("".join(c["source"])) for c in cells):
            out.append(p.name)
    return out


def test_the_arm64_run_takes_every_lesson_that_asks_the_probe():
    got = probe_lessons()
    assert {"02_device.ipynb", "08_layers.ipynb", "14_targets.ipynb", "21_speculate.ipynb"} <= set(got), got
    assert "29_speed_on_a_cpu.ipynb" in got and "01_build_from_scratch.ipynb" not in got


@pytest.mark.slow  # lessons again: `make test` runs it, `make test-fast` leaves it to the per-path tests below
def test_the_lessons_that_ask_the_probe_run_on_arm64():
    """Each lesson whose code asks the CPU probe, top to bottom (`nbdev-test`), as an arm64 CPU would run it. The AVX2
    laptop needs no run of its own: the JupyterLab course runs every lesson as one (tests/test_jupyterlab.py)."""
    cmd = [str(BIN / "nbdev-test"), "--n-workers", "2"]
    cmd += ["--file-re", "^(" + "|".join(re.escape(n) for n in probe_lessons()) + ")$"]
    r = subprocess.run(cmd, cwd=ROOT, env=_env(ARM64_CPU), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]


def test_the_probe_honours_onednns_cap_and_packed_bf16_falls_back():
    """Under the real `ONEDNN_MAX_CPU_ISA=AVX2` (this CPU's own flags), the probe says bf16 is not packed, a bf16
    `PackedLinear` computes its rows one at a time (what oneDNN would refuse), and fp32 is still packed."""
    code = """
import torch, torch.nn as nn
from mdlm_kit.core.device import cpu_features
from mdlm_kit.core.layers import PackedLinear, few_rows_linears, packed_linear_available
assert cpu_features().onednn_max_isa == "AVX2" and not cpu_features().can("packed_bf16")
assert packed_linear_available(torch.bfloat16) is False
lin = few_rows_linears(nn.Sequential(nn.Linear(64, 96)).to(torch.bfloat16), packed=True)[0]  # noted
xs = torch.randn(16, 64, dtype=torch.bfloat16)
with torch.no_grad():
    alone = torch.cat([lin(xs[i : i + 1]) for i in range(16)])
    assert all(torch.equal(lin(xs[:n]), alone[:n]) for n in (2, 3, 8, 16)) and not hasattr(lin, "_packed")
    f32 = few_rows_linears(nn.Sequential(nn.Linear(64, 96)), packed=True)[0]
    f32(torch.randn(5, 64))
print("packed fp32:", hasattr(f32, "_packed") == packed_linear_available())
"""
    r = subprocess.run(
        [sys.executable, "-c", code], env=_env({"ONEDNN_MAX_CPU_ISA": "AVX2"}), capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "packed fp32: True" in r.stdout
    assert "oneDNN's bf16 linears with a packed weight" in r.stderr and "oneDNN capped at AVX2" in r.stderr


def test_a_torch_build_without_onednn_or_fbgemm_takes_the_plain_paths(monkeypatch, capsys):
    "A torch build without oneDNN: `--packed` is noted and plain; without fbgemm's int8: refused with the fix."
    import torch.nn as nn
    from mdlm_kit.core import device, layers

    device._NOTED.clear()
    monkeypatch.setattr(layers, "_onednn_ops", lambda: False)
    monkeypatch.setattr(layers, "_fbgemm_ops", lambda: False)
    lin = layers.few_rows_linears(nn.Sequential(nn.Linear(8, 4)), packed=True)[0]
    x = torch.randn(5, 8)
    with torch.no_grad():
        torch.testing.assert_close(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias))
    assert not hasattr(lin, "_packed")
    assert "has no oneDNN: float32 linears take the plain path" in capsys.readouterr().err
    with pytest.raises(device.DeviceError, match="no x86 \\(fbgemm\\) int8 kernels.*use --draft-precision fp32"):
        layers.int8_linears(nn.Linear(3, 2))
