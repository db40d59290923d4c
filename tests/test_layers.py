"The package's import graph follows the house's layers: each module imports only its own layer and those before it."

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "mdlm_kit"
# core -> text -> (mdlm | drafts, side by side, never importing each other) -> ui -> cli
LAYERS = {
    "core": ["device", "config", "checkpoint", "layers"],
    "text": ["tokenizer", "data"],
    "mdlm": ["model", "diffusion", "sampling", "train"],
    "drafts": [
        "targets",
        "chat_data",
        "features",
        "dflash",
        "eagle3",
        "draft_train",
        "speculative",
        "speculate",
        "recipes",
    ],
    "ui": ["widgets", "playground"],
    "cli": ["cli", "draft_cli"],
}
RANK = {"core": 0, "text": 1, "mdlm": 2, "drafts": 2, "ui": 3, "cli": 4}
LAYER_OF = {m: layer for layer, mods in LAYERS.items() for m in mods}


def imports(path: Path) -> set[str]:
    "Package modules `path` imports, lazy imports inside functions included."
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                out.add(node.module.split(".")[0])
            elif node.level == 0 and (node.module or "").startswith("mdlm_kit."):
                out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("mdlm_kit.")}
    return out


def test_every_module_has_a_layer():
    modules = {p.stem for p in PKG.glob("*.py") if not p.stem.startswith("_")}
    assert modules == set(LAYER_OF), f"unplaced: {modules - set(LAYER_OF)}, gone: {set(LAYER_OF) - modules}"


def test_imports_go_only_down_the_layers():
    bad = []
    for mod, layer in LAYER_OF.items():
        for dep in imports(PKG / f"{mod}.py"):
            d = LAYER_OF[dep]
            if RANK[d] > RANK[layer] or (RANK[d] == RANK[layer] and d != layer):
                bad.append(f"{mod} ({layer}) imports {dep} ({d})")
    assert not bad, "\n".join(bad)


def test_the_check_can_fail(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    from .model import DiffusionTransformer\nimport mdlm_kit.train\n")
    assert imports(tmp_path / "m.py") == {"model", "train"}
