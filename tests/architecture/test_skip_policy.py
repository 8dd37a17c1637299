"""CI fails on a skip nobody expected (tests/skip_policy.py): a broken environment must not read as a green run."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import skip_policy

HERE = Path(__file__).resolve().parents[1]  # tests/, where skip_policy.py is
CASES = '''
import pytest
def test_absent(): pytest.skip("needs a package that is absent")
def test_gpu(): pytest.skip("needs a CUDA device")
def test_runs(): pass
'''


def _run(tmp_path: Path, strict: bool, allowed: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text("import skip_policy\n\ndef pytest_configure(config):\n"
                                          "    skip_policy.register(config)\n")
    (tmp_path / "test_cases.py").write_text(CASES)
    env = {**os.environ, "PYTHONPATH": str(HERE), "ENGINE_STRICT_SKIPS": "1" if strict else "0"}
    if allowed is not None:
        (tmp_path / "allowed.txt").write_text(allowed)
        env["ENGINE_EXPECTED_SKIPS"] = str(tmp_path / "allowed.txt")
    else:
        env.pop("ENGINE_EXPECTED_SKIPS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_an_unexpected_skip_fails_the_run_and_is_named(tmp_path):
    out = _run(tmp_path, strict=True, allowed="^needs a CUDA device  # no GPU on CI\n")
    assert out.returncode == 1, out.stdout
    assert "test_cases.py::test_absent: needs a package that is absent" in out.stdout
    assert "test_gpu" not in out.stdout.split("skips not in")[1]  # the allowed one is not named


def test_expected_skips_pass(tmp_path):
    out = _run(tmp_path, strict=True, allowed="needs a package\nneeds a CUDA device\n")
    assert out.returncode == 0, out.stdout


def test_without_the_strict_flag_skips_stay_skips(tmp_path):
    out = _run(tmp_path, strict=False, allowed=None)
    assert out.returncode == 0 and "2 skipped" in out.stdout, out.stdout


def test_the_shipped_allow_list_parses_and_comments_are_ignored(tmp_path):
    listed = tmp_path / "l.txt"
    listed.write_text("# a comment\n\n^needs a CUDA device   # why\n")
    assert [p.pattern for p in skip_policy.expected_patterns(listed)] == ["^needs a CUDA device"]
    skip_policy.expected_patterns(skip_policy.ALLOW_LIST)  # the repository's own list compiles
