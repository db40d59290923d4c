"""The package's import graph follows the house's layers: each module imports only its own layer and those before it.
A layer is a folder of the package (mdlm_kit/core, text, mdlm, drafts, ui, cli)."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "mdlm_kit"
# core -> text -> (mdlm | drafts, side by side, never importing each other) -> ui -> cli
RANK = {"core": 0, "text": 1, "mdlm": 2, "drafts": 2, "ui": 3, "cli": 4}


def module_name(path: Path, pkg: Path = PKG) -> str:
    "`mdlm_kit/drafts/dflash.py` -> `drafts.dflash`."
    return ".".join(path.relative_to(pkg).with_suffix("").parts)


def imports(path: Path, pkg: Path = PKG) -> set[str]:
    "Package modules (`layer.module`) that `path` imports, lazy imports inside functions included."
    here, pkg_dir = module_name(path, pkg).split("."), pkg
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: `.x` is a sibling, `..core.x` a module of another layer
                base = here[: len(here) - node.level]
                if node.module:
                    out.add(".".join(base + node.module.split(".")))
                else:  # `from . import x`: the names are modules of that package
                    out |= {".".join(base + [a.name]) for a in node.names}
            elif (node.module or "").startswith("mdlm_kit."):
                pkg = node.module.removeprefix("mdlm_kit.")
                as_modules = {f"{pkg}.{a.name}" for a in node.names} & set(modules(pkg_dir))
                out |= as_modules or {pkg}  # `from mdlm_kit.mdlm import model`: the module itself
        elif isinstance(node, ast.Import):
            out |= {a.name.removeprefix("mdlm_kit.") for a in node.names if a.name.startswith("mdlm_kit.")}
    return out


def modules(pkg: Path = PKG) -> dict[str, Path]:
    return {module_name(p, pkg): p for p in sorted(pkg.rglob("*.py")) if not p.name.startswith("_")}


def test_every_module_lives_in_a_layer():
    loose = [m for m in modules() if m.split(".")[0] not in RANK or m.count(".") != 1]
    assert loose == [], f"modules outside the layer folders {sorted(RANK)}: {loose}"
    assert sorted(p.name for p in PKG.glob("*.py")) == ["__init__.py", "_modidx.py"]


def test_imports_go_only_down_the_layers():
    bad = []
    for mod, path in modules().items():
        layer = mod.split(".")[0]
        for dep in imports(path):
            d = dep.split(".")[0]
            assert dep in modules(), f"{mod} imports {dep}, which is not a module of the package"
            if RANK[d] > RANK[layer] or (RANK[d] == RANK[layer] and d != layer):
                bad.append(f"{mod} imports {dep}")
    assert not bad, "\n".join(bad)


def test_the_check_can_fail(tmp_path):
    (tmp_path / "mdlm").mkdir()
    m = tmp_path / "mdlm" / "m.py"
    m.write_text("def f():\n    from .model import X\n    from ..drafts.dflash import Y\nimport mdlm_kit.core.config\n")
    assert imports(m, tmp_path) == {"mdlm.model", "drafts.dflash", "core.config"}
