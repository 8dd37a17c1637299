"""The architecture contract in pyproject.toml ([tool.importlinter], docs/architecture.md#layers) holds, and
lint-imports really reports a break of it (so a passing run means something)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(root: Path) -> subprocess.CompletedProcess:
    """Run lint-imports on the tree at `root` (its own pyproject.toml, its own engine/ and app/ only)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", str(root / "pyproject.toml")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=60)


def test_engine_keeps_its_layer_and_no_dashboard_import_contracts():
    """lint-imports passes on the checkout: every contract is KEPT (listed debt aside, see ignore_imports)."""
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_lint_imports_reports_an_upward_import_a_streamlit_import_and_a_cycle(tmp_path):
    """A copy of the tree where a bottom module (engine.errors) imports the CLI, engine.data imports
    streamlit, and engine.models.ids imports engine.models.checkpoint (which imports ids) breaks all three
    contracts, and the report names each offending import."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("engine", "app"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "engine" / "errors.py", "a", encoding="utf-8") as f:
        f.write("\n\ndef _upward():\n    from engine.cli import main  # noqa: F401  (deliberate break)\n")
    with open(tmp_path / "engine" / "data" / "types.py", "a", encoding="utf-8") as f:
        f.write("\n\nimport streamlit  # noqa: E402,F401  (deliberate break)\n")

    with open(tmp_path / "engine" / "models" / "ids.py", "a", encoding="utf-8") as f:
        f.write("\n\ndef _cycle():\n    from engine.models.checkpoint import models_cache_dir  # noqa: F401  (deliberate)\n")

    result = _lint(tmp_path)
    out = result.stdout
    assert result.returncode != 0, out
    assert "3 broken" in out, out
    assert "engine.errors -> engine.cli" in out
    assert "engine.data.types -> streamlit" in out
    assert "No cycles are allowed in engine.models" in out


def test_the_layers_drawn_in_the_docs_are_the_contracts_layers():
    """docs/architecture.md draws the layers contract line by line (highest first, each line's modules as
    pyproject.toml lists them; a comment may follow after two spaces): a layer added to one and not the other fails."""
    import re
    import tomllib

    contract = next(c for c in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
                    ["contracts"] if c.get("type") == "layers")
    docs = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = docs.split("```\n", 2)[1]  # the first fenced block: the layers
    drawn = [re.split(r"\s{2,}", line.strip())[0] for line in block.splitlines() if line.strip()]
    assert drawn == contract["layers"]
