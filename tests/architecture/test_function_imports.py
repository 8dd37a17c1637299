"""No function-level import inside engine/ dodges an import cycle (scripts/tools/function_imports.py), and the scan
really finds one: two function-level imports pointing at each other, which neither the module-level graph nor
lifting one of them alone would show."""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("function_imports", ROOT / "scripts" / "tools" / "function_imports.py")
function_imports = importlib.util.module_from_spec(_spec)
sys.modules["function_imports"] = function_imports  # dataclasses look their module up there
_spec.loader.exec_module(function_imports)


def test_no_function_level_engine_import_dodges_a_cycle():
    """Every engine-internal import written inside a function is there to defer a heavy import or by choice,
    never because the imported module imports the importer back."""
    found = function_imports.classify(ROOT)
    cycles = [f"{i.module}:{i.line} -> {i.target}" for i in found if i.kind == "engine-cycle"]
    assert not cycles, cycles
    assert function_imports.main(["--smoke"]) == 0


def test_scan_reports_a_cycle_made_of_two_function_level_imports(tmp_path):
    """A copy of engine/ where engine.errors imports engine.settings inside a function (settings imports errors
    at module level) is reported as a cycle-dodging import, and --smoke fails on it."""
    shutil.copytree(ROOT / "engine", tmp_path / "engine", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "engine" / "errors.py", "a", encoding="utf-8") as f:
        f.write("\n\ndef _dodge():\n    from engine.settings import user_dir  # noqa: F401  (deliberate)\n")
    found = function_imports.classify(tmp_path)
    assert [(i.module, i.target) for i in found if i.kind == "engine-cycle"] == [("engine.errors", "engine.settings")]
    assert function_imports.main(["--smoke", "--root", str(tmp_path)]) == 1
