"""Import hygiene, checked by parsing the sources: modules below `engine/__init__` import what they need from its
module, never through the package's face; no two engine modules import each other at run time; and the entries in
scripts/, the tests and tests/data/ import installed modules instead of editing `sys.path`."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "engine"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import that runs (function-level included), skipping `if TYPE_CHECKING:`
    blocks, which only type checkers read."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name, []) for a in node.names)
    return found


def test_no_engine_module_imports_through_the_package_face():
    """`from engine import settings` (or `__version__`) inside engine/ reads as importing engine/__init__ from
    below: every module imports the module itself (`import engine.settings as settings`, `engine.version`)."""
    offenders = [f"{p.relative_to(ROOT)}:{line}: from engine import {', '.join(names)}"
                 for p in sorted(ENGINE.rglob("*.py")) if p != ENGINE / "__init__.py"
                 for line, module, names in _runtime_imports(p) if module == "engine"]
    assert not offenders, "\n".join(offenders)


def test_no_two_engine_modules_import_each_other():
    """A circle of two (explainer <-> registry was one) means neither module can be read or loaded alone."""
    modules = {_module_name(p): p for p in ENGINE.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for _, module, names in _runtime_imports(path):
            targets.add(module)
            targets.update(f"{module}.{n}" for n in names if f"{module}.{n}" in modules)
        edges[name] = {t for t in targets if t in modules and t != name}
    circles = sorted({tuple(sorted((a, b))) for a, out in edges.items() for b in out
                      if a in edges.get(b, set()) and not (a.startswith(b + ".") or b.startswith(a + "."))})
    assert not circles, f"modules that import each other: {circles}"


def test_explainer_and_registry_do_not_import_each_other():
    """The measure registry names Explainer for type checkers only; the explainer never imports the registry."""
    explainer = {m for _, m, _ in _runtime_imports(ENGINE / "importance" / "explainer.py")}
    registry = {m for _, m, _ in _runtime_imports(ENGINE / "importance" / "registry.py")}
    assert "engine.importance.registry" not in explainer
    assert "engine.importance.explainer" not in registry


def _edits_sys_path(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and ast.unparse(node) == "sys.path":
            lines.append(node.lineno)
    return lines


#: Processes that start an entry as the interpreter would set `sys.path[0]` as it does (the entry's folder, or the
#: working folder for `python -m`): the one sys.path write the tests make.
ZYGOTES = ("tests/smoke_zygote.py", "tests/server_zygote.py")


def test_scripts_tests_and_test_data_do_not_edit_sys_path():
    """What the entries and the tests import (engine, engine.smoke, the helpers beside the tests, which pytest's
    rootdir import finds) is installed or importable: no entry and no test puts a folder on sys.path, which would
    import another checkout's code than the one installed (five test files did)."""
    files = [p for folder in ("scripts", "tests") for p in sorted((ROOT / folder).rglob("*.py"))]
    offenders = [f"{p.relative_to(ROOT)}:{line}" for p in files if str(p.relative_to(ROOT)) not in ZYGOTES
                 for line in _edits_sys_path(p)]
    assert not offenders, f"sys.path edits: {offenders}"
