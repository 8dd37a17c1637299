"""Count the imports written inside functions in engine/ (an AST scan), by kind.

A function-level import either defers a heavy or optional dependency (torch, transformers, ray, peft, ...) so
that `import engine`, `python -m engine --help` and the pages start fast, or dodges an import cycle. The first
kind is kept on purpose; the second hides a tangle the import contract (pyproject.toml [tool.importlinter])
would otherwise show, so the engine keeps none of those: this script lists every function-level import of an
engine module and says whether lifting it to the top of its file would close a cycle of module-level imports.

    python scripts/tools/function_imports.py            # a summary by kind, then every engine-internal one
    python scripts/tools/function_imports.py --smoke    # exit 1 if any function-level engine import dodges a cycle

Kinds: `external` (a third-party or standard-library module), `engine-deferred` (an engine module imported
inside a function in a module that must stay light: the CLI, whose `run()` loads what the command needs; or
one whose module-level imports reach torch, imported from a module that does not), `engine-cycle` (the imported module
imports the importing one back, directly or not, counting function-level imports too: the ones to remove), `engine-other` (neither: free to lift).
"""
from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: third-party modules heavy to import (seconds) or optional; deferring them is why most local imports exist
HEAVY = ("torch", "transformers", "ray", "peft", "captum", "sklearn", "scipy", "pandas", "pyarrow", "datasets",
         "safetensors", "accelerate", "trueskill", "choix", "matplotlib", "numpy", "streamlit", "tokenizers")


@dataclass(frozen=True)
class LocalImport:
    """One import statement inside a function body."""
    module: str  # the importing module, dotted
    line: int
    target: str  # the imported module, dotted (for `from a.b import c`: a.b, or a.b.c when c is a module)
    kind: str = ""


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _resolve(node, module, is_package)
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in modules else base)
    return out


def _in_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def scan(root: Path = ROOT, package: str = "engine") -> tuple[dict[str, set[str]], list[LocalImport]]:
    """(module-level engine imports of each engine module, every function-level import).

    An edge goes to the module named (a package's `__init__` only when the package itself is imported from):
    Python runs a parent's `__init__` first, but a cycle through it is one the package layout makes, not the
    module's code.

    Args:
        root: the checkout (holds `package/`).
        package: the top package to scan.

    Returns:
        A graph {module: engine modules it imports at module level} (`if TYPE_CHECKING:` blocks left out) and
        the function-level imports, kind not yet set.
    """
    files = sorted((root / package).rglob("*.py"))
    modules = {module_name(f, root) for f in files}
    graph: dict[str, set[str]] = {}
    local: list[LocalImport] = []
    for path in files:
        module = module_name(path, root)
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[module] = set()

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _in_type_checking(child):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target in _targets(child, module, is_package, modules):
                        if in_function:
                            local.append(LocalImport(module, child.lineno, target))
                        elif target.split(".")[0] == package:
                            graph[module].add(target)
                visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(tree, False)
    # one entry per (module, line, target): `from a import b, c` names a once
    return graph, list(dict.fromkeys(local))


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, stack = set(), [start]
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        if node in seen:
            continue
        seen.add(node)
        stack.extend(graph.get(node, ()))
    return False


def _imports_heavy(graph: dict[str, set[str]], root: Path, module: str, cache: dict[str, bool]) -> bool:
    """Whether importing `module` (and what it imports at module level) imports torch or transformers."""
    if module in cache:
        return cache[module]
    cache[module] = False
    path = root / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    heavy = False
    if path.is_file():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("torch", "transformers") for a in node.names):
                heavy = True
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in ("torch", "transformers"):
                heavy = True
    heavy = heavy or any(_imports_heavy(graph, root, m, cache) for m in graph.get(module, ()))
    cache[module] = heavy
    return heavy


def classify(root: Path = ROOT, package: str = "engine") -> list[LocalImport]:
    """Every function-level import in `package`, with its kind (see the module docstring).

    Args:
        root: the checkout.
        package: the top package.

    Returns:
        One LocalImport per imported module, in file and line order.
    """
    graph, local = scan(root, package)
    # every import counts for a cycle (as for the import contract): two function-level imports that point at
    # each other are a cycle that neither, lifted alone, would reveal
    full = {m: set(targets) for m, targets in graph.items()}
    for item in local:
        if item.target in graph:
            full[item.module].add(item.target)
    heavy: dict[str, bool] = {}
    out = []
    for item in local:
        if item.target.split(".")[0] != package:
            kind = "external"
        elif item.target not in graph and item.target.rsplit(".", 1)[0] not in graph:
            kind = "external"
        elif item.target != item.module and _reaches(full, item.target, item.module):
            kind = "engine-cycle"
        elif item.module.startswith(f"{package}.cli") or item.module == package or (
                _imports_heavy(graph, root, item.target, heavy) and not _imports_heavy(graph, root, item.module, heavy)):
            kind = "engine-deferred"
        else:
            kind = "engine-other"
        out.append(LocalImport(item.module, item.line, item.target, kind))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="exit 1 if a function-level engine import dodges a cycle")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to scan (default: this one)")
    parser.add_argument("--all", action="store_true", help="also list the external and deferred ones")
    args = parser.parse_args(argv)
    found = classify(args.root)
    counts = Counter(i.kind for i in found)
    external = Counter(i.target.split(".")[0] for i in found if i.kind == "external")
    print(f"{len(found)} function-level imports in engine/: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print("external, by top module: " + ", ".join(f"{k} {v}" for k, v in external.most_common()))
    for item in found:
        if args.all or item.kind in ("engine-cycle", "engine-other"):
            print(f"  {item.kind:16} {item.module}:{item.line} -> {item.target}")
    if args.smoke and counts["engine-cycle"]:
        print(f"{counts['engine-cycle']} function-level imports dodge a cycle", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
