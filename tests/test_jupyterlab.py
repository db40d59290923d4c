"""The course as learners open it: JupyterLab on loopback, driven by headless Chromium.

Each notebook is opened in a copy of `nbs/`, run with Run All, saved, and read back: no cell may end in an error,
and every cell must have run. In the widgets notebook every explorer must show a figure with drawn pixels after
Run All and again after each of its controls is moved. The cells nbdev-test leaves out (a `tst_flags` flag: `notest`,
`slow`, hours of training, a server that blocks; the `nbdev_export()` call that ends each lesson) are made raw in the
copy, so Run All runs what nbdev-test runs.

On an x86 machine the course runs as an AVX2 laptop would run it (`LAPTOP_CPU`: the CPU probe's answer, and ATen's
and oneDNN's kernels held to AVX2), the most common learner's CPU: this is the one run of every lesson in `make test`
(the lessons that ask the CPU probe run once more as an arm64 CPU, tests/test_cpu_paths.py), and it is what catches a
lesson that only works with AVX-512. `make test-fast` runs the lessons on this CPU as it is.
"""

import base64
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from conftest import CHROMIUM, CHROMIUM_MISSING, LAPTOP_CPU, is_x86, simulated_cpu_env

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.name for p in (ROOT / "nbs").glob("*.ipynb"))
WIDGETS = "23_widgets.ipynb"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--no-first-run",
]
# JupyterLab's own settings for the test: every cell in the page (no windowing), no autosave, no news or update checks
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"checkForUpdates": False, "fetchNews": "false"},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# the cell flags nbdev-test skips, from the project's own settings ([tool.nbdev] tst_flags)
TEST_FLAGS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["nbdev"]["tst_flags"].split()


def _skip_what_nbdev_test_skips(nb_path: Path):
    """Make raw every code cell that nbdev-test leaves out (its flags, `eval: false`, the `nbdev_export()` call at the
    end of each lesson), so Run All runs what nbdev-test runs; the others start unnumbered (`_RUN_ENDED` reads the
    numbers)."""
    from nbdev.test import nb_test_cells

    runs = {c.id for c in nb_test_cells(nb_path, TEST_FLAGS)}
    nb = json.loads(nb_path.read_text())
    for c in nb["cells"]:
        if c["cell_type"] == "code" and c["id"] not in runs:
            c["cell_type"] = "raw"
            for k in ("outputs", "execution_count"):
                c.pop(k, None)
        elif c["cell_type"] == "code":
            c["execution_count"] = None
    nb_path.write_text(json.dumps(nb, indent=1))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    "A JupyterLab server on 127.0.0.1 over a copy of the course; yields (url, folder of the copied notebooks)."
    if not Path(CHROMIUM).exists():
        pytest.fail(CHROMIUM_MISSING)
    work = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "nbs", work / "nbs", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for name in ("pyproject.toml", "configs"):  # what the notebooks read above nbs/ (nbdev's settings, configs/)
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, work / name)
    for nb in (work / "nbs").glob("*.ipynb"):
        _skip_what_nbdev_test_skips(nb)
    settings = work / "lab-settings"
    for rel, value in LAB_SETTINGS.items():
        (settings / rel).parent.mkdir(parents=True, exist_ok=True)
        (settings / rel).write_text(json.dumps(value))
    env = {
        **(simulated_cpu_env(LAPTOP_CPU) if is_x86() else os.environ),  # every kernel runs as an AVX2 laptop
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(work / "ws"),
        "JUPYTER_CONFIG_DIR": str(work / "cfg"),
        "JUPYTER_RUNTIME_DIR": str(work / "rt"),
    }
    env.pop("MPLBACKEND", None)  # the kernel's own inline backend, as a learner gets it
    port = _free_port()
    log = open(work / "lab.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--LabApp.expose_app_in_browser=True",
            "--ServerApp.terminals_enabled=False",
            f"--ServerApp.root_dir={work / 'nbs'}",
        ]
        + (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
        cwd=work / "nbs",
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                pytest.fail(f"JupyterLab did not start; its log:\n{(work / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.5)
    yield url, work / "nbs"
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


_CURRENT = "window.jupyterapp && window.jupyterapp.shell.currentWidget"
_KERNEL_IDLE = f"""() => {{
    const w = {_CURRENT};
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return !!k && k.status === 'idle' && w.content.widgets.length > 0; }}"""
# Run All marks every code cell [*] at once; it has ended when a cell has its number (the copies start with none), no
# prompt shows [*] and the kernel is idle (a cell that fails clears the rest of the queue)
_RUN_ENDED = f"""() => {{
    const w = {_CURRENT};
    const prompts = [...w.content.node.querySelectorAll('.jp-InputPrompt')].map(p => p.textContent);
    const busy = prompts.some(t => t.includes('*')), ran = prompts.some(t => /[0-9]/.test(t));
    return ran && !busy && w.sessionContext.session.kernel.status === 'idle'; }}"""


def open_lab(page, url: str):
    page.goto(f"{url}/lab")
    page.wait_for_function("() => !!(window.jupyterapp && window.jupyterapp.shell)", timeout=120_000)
    page.evaluate("async () => { await window.jupyterapp.started; await window.jupyterapp.restored; }")


def run_all(page, name: str, timeout_s: float) -> float:
    "Open `name` in the JupyterLab page, Run All, wait until it ends, save; returns the seconds it ran."
    page.evaluate(
        f"async () => {{ await window.jupyterapp.commands.execute('docmanager:open', {{path: {json.dumps(name)}}}); }}"
    )
    page.wait_for_function(
        f"() => {_CURRENT} && {_CURRENT}.context && {_CURRENT}.context.path === {json.dumps(name)}", timeout=120_000
    )
    page.wait_for_function(_KERNEL_IDLE, timeout=120_000)
    t0 = time.time()
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(_RUN_ENDED, timeout=timeout_s * 1000, polling=100)
    seconds = time.time() - t0
    page.evaluate("async () => { await window.jupyterapp.commands.execute('docmanager:save'); }")
    return seconds


def close_notebook(page):
    "Shut the current notebook's kernel down and close its tab (nothing is left running for the next one)."
    page.evaluate(f"""async () => {{ const w = {_CURRENT};
                                     await w.sessionContext.shutdown(); w.close(); }}""")


def cell_failures(nb_path: Path) -> list[str]:
    "Every code cell that did not run or ended in an error, from the notebook as JupyterLab saved it."
    out = []
    for i, c in enumerate(json.loads(nb_path.read_text())["cells"]):
        if c["cell_type"] != "code":
            continue
        head = "".join(c["source"]).splitlines()[:1]
        for o in c.get("outputs", []):
            if o["output_type"] == "error":
                out.append(f"cell {i} {head}: {o['ename']}: {o['evalue']}\n" + "\n".join(o["traceback"])[-1500:])
        if c.get("execution_count") is None:
            out.append(f"cell {i} {head}: never ran")
    return out


def drawn_fraction(data_uri: str) -> float:
    "The share of a PNG's pixels that are not background white."
    from PIL import Image

    img = Image.open(io.BytesIO(base64.b64decode(data_uri.split(",", 1)[1]))).convert("RGB")
    a = np.asarray(img).astype(int)
    return float((a.min(axis=2) < 235).mean())


# each explorer's figure: the PNG its Output widget shows (None while there is none)
_FIGURES = """() => [...document.querySelectorAll('.widget-interact')].map(w => {
    const img = w.querySelector('.widget-output img');
    return img && img.complete && img.naturalWidth > 0 && !img.dataset.stale ? img.src : null; })"""


def _controls(page, i: int):
    "The controls of explorer i: (kind, locator) for each slider, dropdown and text box, in order."
    box = page.locator(".widget-interact").nth(i)
    out = []
    for el in box.locator(":scope > .widget-slider, :scope > .widget-dropdown, :scope > .widget-text").all():
        cls = el.get_attribute("class")
        out.append(("slider" if "widget-slider" in cls else "dropdown" if "widget-dropdown" in cls else "text", el))
    return out


def _move(kind: str, el):
    "Move one control the way a learner would: a slider one step by keyboard, the next dropdown option, a new text."
    if kind == "slider":
        readout = el.locator(".widget-readout")
        before = readout.inner_text()
        handle = el.locator(".noUi-handle")
        handle.focus()
        handle.press("ArrowRight")
        if readout.inner_text() == before:
            handle.press("ArrowLeft")  # it was at its maximum
        return f"{before} -> {readout.inner_text()}"
    if kind == "dropdown":
        sel = el.locator("select")
        options = sel.locator("option").all_inner_texts()
        new = options[(options.index(sel.evaluate("s => s.options[s.selectedIndex].text")) + 1) % len(options)]
        sel.select_option(label=new)
        return new
    box = el.locator("input")
    box.fill("0.9, 0.5, 0.2")
    box.press("Enter")
    return "0.9, 0.5, 0.2"


def check_explorers(page, nbs: Path):
    "Run All in the widgets notebook: each of its six explorers must draw a figure, and draw again after each move."
    run_all(page, WIDGETS, timeout_s=300)
    assert not (fails := cell_failures(nbs / WIDGETS)), "\n".join(fails)
    page.wait_for_timeout(2000)  # anything the browser sends back after Run All (a slider snapping) has landed
    figures = page.evaluate(_FIGURES)
    assert len(figures) == 6, f"expected the notebook's six explorers, found {len(figures)}"
    blank = [i for i, f in enumerate(figures) if f is None or drawn_fraction(f) < 0.01]
    assert not blank, f"explorers {blank} show no drawn figure right after Run All"
    moved = []
    for i in range(len(figures)):
        for kind, el in _controls(page, i):
            page.evaluate(f"""() => {{ const img = document.querySelectorAll('.widget-interact')[{i}]
                                         .querySelector('.widget-output img'); if (img) img.dataset.stale = '1'; }}""")
            what = _move(kind, el)
            page.wait_for_function(f"() => ({_FIGURES})()[{i}] !== null", timeout=30_000)
            frac = drawn_fraction(page.evaluate(_FIGURES)[i])
            err = (
                page.locator(".widget-interact")
                .nth(i)
                .locator(".widget-output [data-mime-type='application/vnd.jupyter.stderr']")
                .count()
            )
            moved.append((i, kind, what, round(frac, 3), err))
    assert len(moved) >= 14, moved  # every control of the six explorers was found and moved
    bad = [m for m in moved if m[3] < 0.01 or m[4]]
    assert not bad, f"explorer, control, move, drawn share, error outputs: {bad}"


def test_jupyterlab_runs_every_notebook_and_every_explorer_draws(lab, browser):
    """Run All in every notebook, one after another in one JupyterLab page (one server and one browser for the whole
    course); the widgets notebook last, with its explorers' figures checked after Run All and after each move."""
    url, nbs = lab
    page = browser.new_page()
    open_lab(page, url)
    errors, times = {}, {}
    for name in [n for n in NOTEBOOKS if n != WIDGETS]:
        times[name] = run_all(page, name, timeout_s=600)
        if fails := cell_failures(nbs / name):
            errors[name] = fails
        close_notebook(page)
    print("Run All seconds:", {k: round(v, 1) for k, v in times.items()})
    try:
        check_explorers(page, nbs)
    except AssertionError as e:  # reported with the notebooks' errors
        errors[WIDGETS] = [str(e)]
    page.close()
    assert not errors, "\n\n".join(f"{k}:\n" + "\n".join(v) for k, v in errors.items())
