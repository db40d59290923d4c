"""Run notebooks top to bottom and save their outputs, kept small, for the docs site (which shows saved outputs).

    python tools/run_nbs.py                 # every notebook in nbs/
    python tools/run_nbs.py nbs/23_widgets.ipynb

`nbdev-test --save` executes each notebook in-process (the same runner as `make nbtest`, `#| notest` cells skipped) and
writes the outputs back; this script then drops what a static page cannot show (widget views, terminal control codes),
re-encodes figures as palette PNGs (a plot has few colours; this cuts them to a third or less) and runs nbdev-clean."""

import base64, io, os, re, subprocess, sys
from pathlib import Path
import nbformat

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("BIN", ROOT / ".venv" / "bin"))
CONTROL = re.compile(r"(\x1b\[[0-9;]*[A-Za-z]|\r)")


def shrink_png(b64: str) -> str:
    from PIL import Image

    im = Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB")
    out = io.BytesIO()
    im.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(out, format="PNG", optimize=True)
    small = base64.b64encode(out.getvalue()).decode()
    return small if len(small) < len(b64) else b64


def tidy(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        keep = []
        for o in cell.get("outputs", []):
            if o.output_type == "stream":
                if o.name == "stderr":
                    continue  # warnings and progress bars: local paths and noise on the page
                o.text = CONTROL.sub("", o.text)
                if not o.text.strip():
                    continue
            data = o.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                continue  # a live widget; the static figure is beside it
            if "image/png" in data:
                data["image/png"] = shrink_png(data["image/png"])
            keep.append(o)
        cell.outputs = keep
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, path)
    return path.stat().st_size


def main(paths):
    paths = [Path(p) for p in paths] or sorted((ROOT / "nbs").glob("*.ipynb"))
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # let the notebook runner use the inline backend
    for p in paths:
        r = subprocess.run([str(BIN / "nbdev-test"), "--save", str(p)], cwd=ROOT, env=env)
        if r.returncode:
            sys.exit(f"{p} failed; its outputs were not saved")
        print(f"{p.name}: {tidy(p) / 1024:.0f} KB", flush=True)
    subprocess.run([str(BIN / "nbdev-clean")], cwd=ROOT, check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
