"""Write README.md from nbs/index.ipynb without Quarto (which cannot be installed offline).

Markdown cells are copied; code cells become ```python blocks followed by their text output (no block for `#| echo:
false`); saved figures are written to images/ and linked; cells with a `#| hide` directive are dropped and other `#|`
directive lines are removed. `--check` compares instead of writing.
"""

import base64, json, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = "<!-- Generated from nbs/index.ipynb by `make readme`; edit the notebook, not this file. -->\n\n"


def render(nb_path: Path, images: dict) -> str:
    "README text; fills `images` with {relative path: PNG bytes} for the figures it links."
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    parts = []
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        lines = src.splitlines()
        directives = [l.strip() for l in lines if l.strip().startswith("#|")]
        if any(d.replace(" ", "") in ("#|hide", "#|include:false") for d in directives):
            continue
        body = "\n".join(l for l in lines if not l.strip().startswith("#|")).strip("\n")
        if cell["cell_type"] == "markdown":
            parts.append(body)
        elif cell["cell_type"] == "code" and body:
            if not any(d.replace(" ", "") == "#|echo:false" for d in directives):
                parts.append(f"```python\n{body}\n```")
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                if "image/png" in data:
                    name = f"images/{nb_path.stem}-{cell.get('id', len(images))}.png"
                    images[name] = base64.b64decode("".join(data["image/png"]))
                    parts.append(f"![]({name})")
                    continue
                text = out.get("text") or data.get("text/plain")
                if text:
                    parts.append("```\n" + "".join(text).rstrip("\n") + "\n```")
    return HEADER + "\n\n".join(p for p in parts if p) + "\n"


def main():
    images = {}
    text = render(ROOT / "nbs" / "index.ipynb", images)
    readme = ROOT / "README.md"
    if "--check" in sys.argv:
        stale = [n for n, b in images.items() if not (ROOT / n).is_file() or (ROOT / n).read_bytes() != b]
        if not readme.is_file() or readme.read_text(encoding="utf-8") != text or stale:
            sys.exit("README.md is out of date with nbs/index.ipynb: run `make readme` and commit it.")
        return
    for name, b in images.items():
        (ROOT / name).parent.mkdir(exist_ok=True)
        (ROOT / name).write_bytes(b)
    readme.write_text(text, encoding="utf-8")
    print(f"wrote {readme.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
