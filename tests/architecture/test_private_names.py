"""No engine module uses another engine module's private name: what a second module needs has a public, documented
name in the module that owns it (a private name is free to change with its module alone)."""
from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, classes, assignments (module, class and `self._x = ...`) and
    keyword arguments (an attribute set through a call)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
        elif isinstance(node, ast.keyword) and node.arg:  # argparse's set_defaults(_run=...) names an attribute
            names.add(node.arg)
    return {n for n in names if _private(n)}


def _uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every private attribute read on something other than self, cls or super(), and of every
    private name imported from an engine module."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.ctx, ast.Load):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue
            out.append((node.lineno, node.attr))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("engine"):
            out += [(node.lineno, alias.name) for alias in node.names if _private(alias.name)]
    return out


def test_no_engine_module_uses_a_private_name_that_another_engine_module_defines():
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(ENGINE.rglob("*.py"))}
    defined = {path: _defined(tree) for path, tree in trees.items()}
    crossing = []
    for path, tree in trees.items():
        for line, name in _uses(tree):
            if name in defined[path]:
                continue  # its own (or a name it shares with a third-party object it also sets)
            owners = [p for p, names in defined.items() if name in names and p != path]
            if owners:
                crossing.append(f"{path.relative_to(ENGINE.parent)}:{line} uses {name} of "
                                f"{', '.join(str(p.relative_to(ENGINE.parent)) for p in owners)}")
    assert not crossing, "\n".join(crossing)
