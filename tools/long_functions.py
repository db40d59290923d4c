"""Hand-written functions longer than a limit (default 60 lines) in the exported package.

python tools/long_functions.py [--limit 60]
"""

import argparse
import ast
from pathlib import Path


def long_functions(package: Path, limit: int) -> list[tuple[int, str]]:
    out = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "_modidx.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append((n, f"{path.relative_to(package)}:{node.lineno} {node.name}"))
    return sorted(out, reverse=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--limit", type=int, default=60)
    args = ap.parse_args()
    for n, where in long_functions(Path(__file__).resolve().parents[1] / "mdlm_kit", args.limit):
        print(f"{n:4d}  {where}")
