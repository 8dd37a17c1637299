"""No module of engine/, app/, pages/ or bench/ uses another module's private name: what a second module needs has a
public, documented name in the module that owns it (a private name is free to change with its module alone).

An engine module is checked against engine's own modules; a module of the dashboard (app/, pages/) or of bench/
against engine/, app/, pages/, bench/ and the helpers at the top of tests/ (a bench loads tests/browser_helpers.py
by path). A name a module binds only as a function's local variable (`_wait = helpers._wait`) is not its own.

In tests/ (every module of it, a test module or a helper beside one) no module imports another test module
(`test_*.py`: what two test modules share lives in a helper module at tests/ root, e.g. tests/browser_helpers.py,
or a fixture in tests/conftest.py), and none imports a private name from a module of this project or of tests/, or
reads one on a helper module it imports. KNOWN_IN_TESTS names the imports that predate the check and are still to
move; it only shrinks (an entry no longer found fails too)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "engine"
#: the folders whose modules must not use another module's private name
CHECKED = ("engine", "app", "pages", "bench")
#: the folders of tests/ whose modules a test imports by bare name (pytest.ini's pythonpath)
TEST_PATHS = ("tests", "tests/engine", "tests/app", "tests/browser", "tests/architecture")
#: "path: module.name" (a private name imported) or "path: module" (a test module imported) found before the check
#: covered tests/, outside tests/browser/ (whose own went to tests/browser_helpers.py): each still to move to a helper
#: module or to a public name; remove an entry with its import
KNOWN_IN_TESTS = frozenset({
    "tests/app/test_annotate_page.py: test_plausibility",
    "tests/app/test_hostile_text.py: test_atomic", "tests/app/test_hostile_text.py: test_atomic._untrained_tiny",
    "tests/app/test_llm_dashboard.py: test_prompted",
    "tests/app/test_readable_pages.py: test_app", "tests/app/test_readable_pages.py: test_app._run",
    "tests/app/test_readable_pages.py: test_app._tidy",
    "tests/architecture/test_configuration_docs.py: test_target_names",
    "tests/architecture/test_configuration_docs.py: test_target_names._prompted",
    "tests/architecture/test_test_cache.py: conftest._code_hash",
    "tests/card_stubs.py: engine.groundtruth.card_plan._WORKER_PLANS",
    "tests/engine/test_atomic.py: engine.models.registry._COPIED_SUFFIXES",
    "tests/engine/test_card_function_families.py: test_groundtruth_min_deciding",
    "tests/engine/test_card_plan.py: test_groundtruth_min_deciding",
    "tests/engine/test_conversion_progress.py: engine.models.llm_package._tensor_progress",
    "tests/engine/test_default_measures.py: engine.cli.explain._chosen_measures",
    "tests/engine/test_erasure_masf_prompted.py: test_selfexplain",
    "tests/engine/test_explain_streaming.py: test_prompted",
    "tests/engine/test_gemma.py: engine.models.llm_package._gguf_parsed_once",
    "tests/engine/test_gpu_path.py: engine.models.training._collate",
    "tests/engine/test_gpu_path.py: engine.models.training._tokenised_rows",
    "tests/engine/test_groundtruth_planting.py: engine.groundtruth.card_plan._WORKER_PLANS",
    "tests/engine/test_groundtruth_set_theory.py: handbuilt_models._Tokenizer",
    "tests/engine/test_groundtruth_truth_store.py: test_groundtruth_min_deciding",
    "tests/engine/test_groundtruth_truth_store.py: test_groundtruth_min_deciding._words_dataset",
    "tests/engine/test_interactions.py: test_groundtruth_set_theory",
    "tests/engine/test_metric_card.py: test_groundtruth_min_deciding",
    "tests/engine/test_model_kinds.py: test_prompted",
    "tests/engine/test_random_logit.py: handbuilt_models._Tokenizer",
})


def _owner_files(folder: str) -> list[Path]:
    """The modules whose private names a module of `folder` must not use (a private name none of them defines is a
    third party's; engine's own only for engine, where torch's `tensor._version` is also a test's name)."""
    if folder == "engine":
        return sorted(ENGINE.rglob("*.py"))
    helpers = [p for p in sorted((ROOT / "tests").glob("*.py")) if not p.name.startswith(("test_", "conftest"))]
    return [p for f in CHECKED for p in sorted((ROOT / f).rglob("*.py"))] + helpers


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _function_locals(tree: ast.AST) -> set[str]:
    """The private names bound only as local variables of functions: `_wait = helpers._wait` inside a function does
    not make `_wait` an attribute the module owns."""
    local, elsewhere = set(), set()
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    inside = {id(n) for f in functions for stmt in ([f.body] if isinstance(f, ast.Lambda) else f.body)
              for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and _private(node.id):
            (local if id(node) in inside else elsewhere).add(node.id)
    return local - elsewhere - _defined(tree, names_too=False)


def _defined(tree: ast.AST, names_too: bool = True) -> set[str]:
    """The private names a module defines: functions, classes, assignments (module, class and `self._x = ...`) and
    keyword arguments (an attribute set through a call). `names_too=False`: without plain variables."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and names_too:
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
        elif isinstance(node, ast.keyword) and node.arg:  # argparse's set_defaults(_run=...) names an attribute
            names.add(node.arg)
    return {n for n in names if _private(n)}


def _first_party(module: str | None) -> bool:
    """Whether `from module import ...` imports from this project: engine, app, pages, or a module a bench imports
    by its bare name (a bench runs with bench/ first on its path: `from dashboard import ...`)."""
    root = (module or "").split(".")[0]
    return root in ("engine", "app", "pages") or (ROOT / "bench" / f"{root}.py").exists()


def _uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every private attribute read on something other than self, cls or super(), and of every
    private name imported from a module of this project."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.ctx, ast.Load):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue
            out.append((node.lineno, node.attr))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _first_party(node.module):
            out += [(node.lineno, alias.name) for alias in node.names if _private(alias.name)]
    return out


def _crossings(folder: str) -> list[str]:
    """'path:line uses name of owner' for each private name a module of `folder` uses that another module defines."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in _owner_files(folder)}
    defined = {path: _defined(tree) for path, tree in trees.items()}
    crossing = []
    for path, tree in trees.items():
        if path.relative_to(ROOT).parts[0] != folder:
            continue
        own = defined[path] - _function_locals(tree)
        for line, name in _uses(tree):
            if name in own:
                continue  # its own (or a name it shares with a third-party object it also sets)
            owners = [p for p, names in defined.items() if name in names and p != path]
            if owners:
                crossing.append(f"{path.relative_to(ROOT)}:{line} uses {name} of "
                                f"{', '.join(str(p.relative_to(ROOT)) for p in owners)}")
    return crossing


def test_no_engine_module_uses_a_private_name_that_another_engine_module_defines():
    crossing = _crossings("engine")
    assert not crossing, "\n".join(crossing)


@pytest.mark.parametrize("folder", [f for f in CHECKED if f != "engine"])
def test_no_dashboard_or_bench_module_uses_a_private_name_that_another_module_defines(folder):
    crossing = _crossings(folder)
    assert not crossing, "\n".join(crossing)


def _tests_modules() -> set[str]:
    """The names a module of tests/ imports another module of tests/ by (each file of TEST_PATHS, by its stem)."""
    return {p.stem for folder in TEST_PATHS for p in (ROOT / folder).glob("*.py")}


def _test_module(name: str) -> bool:
    return name.startswith("test_")


def _test_crossings() -> set[str]:
    """'path: module' for each test module a module of tests/ imports (at any depth: a function's import counts),
    'path: module.name' for each private name it imports from this project or tests/ or reads on a module of tests/
    it imports."""
    local = _tests_modules()
    found = set()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        where = path.relative_to(ROOT)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {}  # the name a module of tests/ is bound to -> that module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    root = alias.name.split(".")[0]
                    if root in local:
                        imported[alias.asname or root] = root
                        if _test_module(root):
                            found.add(f"{where}: {root}")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                root = node.module.split(".")[0]
                if not (root in local or _first_party(node.module)):
                    continue
                if _test_module(root):
                    found.add(f"{where}: {node.module}")
                found |= {f"{where}: {node.module}.{alias.name}" for alias in node.names if _private(alias.name)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported
                    and _private(node.attr)):
                found.add(f"{where}: {imported[node.value.id]}.{node.attr}")
    return found


def test_no_test_module_imports_another_test_module_or_a_private_name():
    crossing = sorted(_test_crossings() - KNOWN_IN_TESTS)
    assert not crossing, ("what two test modules share goes to a helper module at tests/ root (public names) or a "
                          "fixture of tests/conftest.py:\n" + "\n".join(crossing))


def test_the_known_crossings_in_tests_are_all_still_there():
    gone = sorted(KNOWN_IN_TESTS - _test_crossings())
    assert not gone, "moved: remove from KNOWN_IN_TESTS:\n" + "\n".join(gone)
