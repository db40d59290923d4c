"""The course can be read top to bottom: a lesson imports only what earlier lessons define; `ls nbs/*.ipynb`, the
README's course table and the docs sidebar list the lessons in one order; no lesson is a lab journal."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"


def _cells(nb: Path, kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == kind]


def course() -> list[list[str]]:
    "The parts of the README's course table (from nbs/index.ipynb), each a list of notebook names, in reading order."
    text = "\n".join(_cells(NBS / "index.ipynb", "markdown"))
    rows = re.findall(r"^\| (\d+\.[^|]*) \| ([^|]+) \|", text, re.M)
    assert rows, "no course table in nbs/index.ipynb"
    return [re.findall(r"`([^`]+)`", nbs) for _, nbs in rows]


def module_of(nb: Path) -> str | None:
    m = re.search(r"#\| default_exp (\S+)", "\n".join(_cells(nb, "code")))
    return m.group(1) if m else None


def imported_modules(nb: Path) -> set[str]:
    "The kit's modules a notebook's code cells import (exported or not)."
    code = "\n".join(_cells(nb, "code"))
    return set(re.findall(r"(?:from|import) mdlm_kit\.([\w.]+)", code))


def order_violations(lessons: list[list[str]]) -> list[str]:
    "Each notebook's imports of modules defined later in the course."
    rank = {name: (i, j) for i, names in enumerate(lessons) for j, name in enumerate(names)}
    home = {module_of(NBS / f"{n}.ipynb"): n for n in rank}
    bad = []
    for name in rank:
        for mod in sorted(imported_modules(NBS / f"{name}.ipynb")):
            src = home.get(mod)
            if src is not None and src != name and rank[src] > rank[name]:
                bad.append(f"{name} imports mdlm_kit.{mod}, which {src} (later in the course) defines")
    return bad


def test_every_notebook_is_in_the_course():
    listed = [n for lesson in course() for n in lesson]
    on_disk = sorted(p.stem for p in NBS.glob("[0-9]*.ipynb"))
    assert sorted(listed) == on_disk and len(set(listed)) == len(listed)


def test_lessons_use_only_what_earlier_lessons_define():
    assert not order_violations(course()), "\n".join(order_violations(course()))


def test_the_order_check_can_fail():
    lessons = course()
    swapped = lessons[:2] + [lessons[3], lessons[2]] + lessons[4:]  # the model part before the objective it trains with
    assert any("11_train imports mdlm_kit.mdlm.diffusion" in v for v in order_violations(swapped))


def test_the_file_order_is_the_reading_order():
    on_disk = [p.stem for p in sorted(NBS.glob("*.ipynb")) if p.stem != "index"]
    assert on_disk == [n for lesson in course() for n in lesson]


def test_the_docs_sidebar_follows_the_course():
    yml = (ROOT / "_quarto.yml").read_text()
    sidebar = re.findall(r"^\s+- (\d\d\w*)\.ipynb$", yml, re.M)
    assert sidebar == [n for lesson in course() for n in lesson]


DATED = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
RUN_TAG = re.compile(r"\br[2-9]\b")  # the drafter recipes' runs (r2-r8, r9data): the lab's names
WORDS_PER_LESSON = 3000
LAB_SHARE = 0.15


def lab_journal(cells: list[dict]) -> dict:
    "Prose words, dated entries (in any cell), and the words of paragraphs that cite a lab run, of a notebook's cells."
    words = lab = 0
    dated = []
    for c in cells:
        src = "".join(c["source"])
        dated += DATED.findall(src)
        if c["cell_type"] != "markdown":
            continue
        for para in src.split("\n\n"):
            words += len(para.split())
            lab += len(para.split()) if RUN_TAG.search(para) else 0
    return {"words": words, "dated": dated, "lab_words": lab}


def test_no_lesson_is_a_lab_journal():
    seen = {n: lab_journal(json.loads((NBS / f"{n}.ipynb").read_text())["cells"]) for p in course() for n in p}
    assert not {n: s["dated"] for n, s in seen.items() if s["dated"]}, "dated entries belong in bench/ or bench/lab/"
    assert not {n: s["words"] for n, s in seen.items() if s["words"] > WORDS_PER_LESSON}
    share = sum(s["lab_words"] for s in seen.values()) / sum(s["words"] for s in seen.values())
    assert share <= LAB_SHARE, f"{share:.0%} of the course's prose cites lab runs"
    assert sorted(p.name for p in (ROOT / "bench" / "lab").glob("*.ipynb"))  # the lab pages live there


def test_the_lab_journal_check_can_fail():
    md = lambda s: {"cell_type": "markdown", "source": [s]}
    entry = lab_journal([md("## The r5 drafters (2026-12-04)\n\nr5 trained 800 steps.\n\nA lesson paragraph here.")])
    assert entry == {"words": 13, "dated": ["2026-12-04"], "lab_words": 9}  # 5 + 4 + 4 words, the first two cite r5
    assert lab_journal([{"cell_type": "code", "source": ["# saved before 2026-12-03"]}])["dated"] == ["2026-12-03"]


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    lines = readme.splitlines()
    assert len(readme.split()) <= 1200
    assert any(line.startswith("| part | lessons |") for line in lines[:60]), "the course table in the first screens"
    first_image = re.search(r"!\[[^\]]*\]\(images/index-(\w+)\.png\)", readme).group(1)  # tools/make_readme.py's name
    index = json.loads((NBS / "index.ipynb").read_text())["cells"]
    drawing = next(c for c in index if c.get("id") == first_image)
    assert "from_scratch_frames.json" in "".join(drawing["source"])  # lesson 1's trained model writing
