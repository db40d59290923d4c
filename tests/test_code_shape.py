"""The shape of the code a reader meets: no hand-written function longer than a screen (issue 15: at most 60 lines),
and no exported notebook cell longer than 80 (issue 43: one definition, or a few small ones, a cell; a class's methods
follow it in cells of their own with fastcore's `@patch`)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("long_functions", ROOT / "tools" / "long_functions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_no_function_is_longer_than_60_lines():
    assert _tool().long_functions(ROOT / "mdlm_kit", 60) == []


def test_the_length_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (tmp_path / "m.py").write_text(f"def f():\n{body}\n\n\ndef g():\n    return 1\n")
    assert _tool().long_functions(tmp_path, 60) == [(62, "m.py:1 f")]


def long_export_cells(nbs: Path, limit: int) -> list[tuple[int, str]]:
    "(lines, 'notebook cell-id') of every `#| export` cell longer than `limit` lines."
    import json

    out = []
    for path in sorted(nbs.glob("*.ipynb")):
        for c in json.loads(path.read_text())["cells"]:
            lines = "".join(c["source"]).splitlines()
            if c["cell_type"] == "code" and lines and lines[0].startswith("#| export") and len(lines) > limit:
                out.append((len(lines), f"{path.name} {c.get('id')}"))
    return out


def test_no_exported_cell_is_longer_than_80_lines():
    assert long_export_cells(ROOT / "nbs", 80) == []


def test_the_cell_check_sees_a_long_cell(tmp_path):
    import json

    cell = {"cell_type": "code", "id": "c1", "metadata": {}, "outputs": [], "execution_count": None}
    long = dict(cell, source=["#| export\n"] + [f"x{i} = {i}\n" for i in range(80)])
    short = dict(cell, id="c2", source=["#| export\n", "y = 1"])
    plain = dict(cell, id="c3", source=[f"z{i} = {i}\n" for i in range(100)])  # a test cell is not exported
    (tmp_path / "a.ipynb").write_text(json.dumps({"cells": [long, short, plain]}))
    assert long_export_cells(tmp_path, 80) == [(81, "a.ipynb c1")]


def _docstrings(package: Path):
    import ast

    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and ast.get_docstring(node):
                yield f"{path.relative_to(package)} {node.name}", ast.get_docstring(node)


def test_docstrings_render_as_written():
    "The docs render docstrings as Markdown: a `*` outside backticks turns `(B, N*bs)` into italics and drops it."
    import re

    bad = [where for where, doc in _docstrings(ROOT / "mdlm_kit") if "*" in re.sub(r"`[^`]*`", "", doc)]
    assert bad == [], bad
