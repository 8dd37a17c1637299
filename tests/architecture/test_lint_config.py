"""ruff's exclusions skip the shipped results folder at the root only, never a package of the same name."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ruff() -> str:
    found = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(found).is_file():
        pytest.skip("ruff is not installed (requirements-dev.txt)")
    return found


def test_ruff_lints_engine_results_but_not_the_results_folder():
    out = subprocess.run([_ruff(), "check", "--show-files", "."], cwd=ROOT, capture_output=True, text=True, timeout=120)
    files = {Path(line.strip()).resolve().relative_to(ROOT).as_posix() for line in out.stdout.splitlines() if line.strip()}
    assert {"engine/results/store.py", "engine/results/published.py"} <= files
    assert not [f for f in files if f.startswith(("results/", "models_cache/"))]
