"""The package's import graph has no circle: every `import` and `from ... import` of a skillaudit
module (at the top or inside a function) is an edge, and no module reaches itself."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PKG = Path(__file__).resolve().parents[1] / "skillaudit"


def _modules() -> dict[str, Path]:
    out = {}
    for p in [*PKG.rglob("*.py"), *PKG.rglob("*.c")]:  # a C extension (_scan.c) is a module too
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def import_graph() -> nx.DiGraph:
    mods = _modules()
    g = nx.DiGraph()
    for name, path in mods.items():
        g.add_node(name)
        if path.suffix == ".c":
            continue
        pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                targets = subs + ([target] if len(subs) < len(node.names) else [])
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            g.add_edges_from((name, t) for t in targets if t in mods and t != name)
    return g


def test_the_import_graph_has_no_circle():
    """No module imports (directly or through others) a module that imports it back."""
    g = import_graph()
    assert g.number_of_nodes() > 50
    cycles = sorted(nx.simple_cycles(g), key=len)
    assert cycles == [], cycles[:5]


def test_the_graph_sees_function_level_imports():
    """The check reads imports inside functions too: the dispatcher reaches both run modes."""
    g = import_graph()
    assert g.has_edge("skillaudit.engine.dispatch", "skillaudit.engine.taskrun")
    assert g.has_edge("skillaudit.engine.dispatch", "skillaudit.engine.runner")
    assert not g.has_edge("skillaudit.engine.taskrun", "skillaudit.engine.runner")


def test_the_layers_contract_covers_every_package_folder():
    """Issue 54: the package root holds only cli.py, errors.py and __init__.py, and every folder (and
    those modules) sits in a layer of the import-linter contract `make test` runs."""
    import tomllib

    cfg = tomllib.loads((PKG.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    [layers] = [c["layers"] for c in cfg["contracts"] if c["type"] == "layers"]
    named = {m.strip() for layer in layers for m in layer.split("|")}
    root = {p.name for p in PKG.iterdir() if p.name != "__pycache__" and not p.name.endswith((".so", ".pyc"))}
    assert {p for p in root if p.endswith(".py")} == {"cli.py", "errors.py", "__init__.py"}
    top = {f"skillaudit.{p.removesuffix('.py')}" for p in root if p != "__init__.py"}
    assert top == named, (top - named, named - top)
