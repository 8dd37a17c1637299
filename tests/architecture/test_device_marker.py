"""The tests whose result depends on the torch device carry the `device` marker (what a lent GPU runs with
ENGINE_TEST_DEVICE=cuda python -m pytest -m device), which replaced a list of files kept beside the GPU scripts."""
from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_device_marker_is_registered_and_selects_the_marked_modules_only():
    markers = configparser.ConfigParser()
    markers.read(ROOT / "pytest.ini")
    assert any(line.startswith("device:") for line in markers["pytest"]["markers"].strip().splitlines())
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "device", "-p", "no:randomly",
                          "tests/engine/test_whole_word_masking.py", "tests/engine/test_cli.py"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    selected = [line for line in out.stdout.splitlines() if "::" in line]
    assert selected and all(line.startswith("tests/engine/test_whole_word_masking.py::") for line in selected), out.stdout[-2000:]
    assert not (ROOT / "scripts" / "gpu_session").exists(), "no list of device tests beside the GPU scripts"
