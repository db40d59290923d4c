"""The course can be read top to bottom: a lesson's notebooks import only what the reference notebooks, earlier
lessons, or earlier notebooks of the same lesson define; the docs sidebar lists the lessons in the README's order."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"


def _cells(nb: Path, kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == kind]


def course() -> list[list[str]]:
    "The lessons of the README's course table (from nbs/index.ipynb), each a list of notebook names; reference last."
    text = "\n".join(_cells(NBS / "index.ipynb", "markdown"))
    rows = re.findall(r"^\| (\d+\.[^|]*|reference) \| ([^|]+) \|", text, re.M)
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
    "Each notebook's imports of modules defined later in the course (the reference counts as first)."
    lessons = lessons[-1:] + lessons[:-1]  # the reference notebooks come before lesson 1
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
    swapped = [lessons[0], lessons[2], lessons[1]] + lessons[3:]  # the model lesson before the objective it trains with
    assert any("08_train imports mdlm_kit.mdlm.diffusion" in v for v in order_violations(swapped))


def test_the_docs_sidebar_follows_the_course():
    yml = (ROOT / "_quarto.yml").read_text()
    sidebar = re.findall(r"^\s+- (\d\d\w*)\.ipynb$", yml, re.M)
    assert sidebar == [n for lesson in course() for n in lesson]  # lessons 1, 2, ..., then the reference
