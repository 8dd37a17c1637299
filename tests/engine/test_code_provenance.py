"""Provenance that names the code: "dirty" is decided over the code that computes, a dirty code
version carries the hash of its diff, and `report --check` refuses shipped results whose code no commit holds."""
from __future__ import annotations

import json
import subprocess

import pytest

import engine.runtime as runtime
from engine.results.code_provenance import code_provenance_problems


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A git checkout with code (engine/) and results, committed; runtime.code_version looks at it."""
    (tmp_path / "engine").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "engine" / "compute.py").write_text("x = 1\n")
    (tmp_path / "results" / "run.json").write_text("{}\n")
    (tmp_path / "docs" / "notes.md").write_text("notes\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "start")
    monkeypatch.setattr(runtime, "PROJECT_ROOT", tmp_path)
    runtime.code_version.cache_clear()
    yield tmp_path
    runtime.code_version.cache_clear()


def _version() -> str:
    runtime.code_version.cache_clear()
    return runtime.code_version()


def test_results_and_docs_changes_leave_the_code_version_clean(checkout):
    """A run writes tracked files under results/ itself; docs change beside it: neither makes the code dirty."""
    (checkout / "results" / "run.json").write_text('{"cells": 3}\n')
    (checkout / "docs" / "notes.md").write_text("more notes\n")
    (checkout / "results" / "new.json").write_text("{}\n")
    version = _version()
    assert runtime.code_is_committed(version) and "dirty" not in version


def test_a_code_change_is_dirty_with_the_hash_of_its_diff(checkout):
    """The same uncommitted code gives the same version; other code another; an untracked module counts."""
    (checkout / "engine" / "compute.py").write_text("x = 2\n")
    first = _version()
    assert not runtime.code_is_committed(first) and first.split("-dirty.")[1] == runtime.code_diff_sha256()
    assert _version() == first
    (checkout / "engine" / "compute.py").write_text("x = 3\n")
    assert _version() != first
    (checkout / "engine" / "compute.py").write_text("x = 1\n")
    assert runtime.code_is_committed(_version())
    (checkout / "engine" / "extra.py").write_text("y = 1\n")
    assert not runtime.code_is_committed(_version()), "a new, untracked module computes too"


def _write(root, name, provenance):
    path = root / "run" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cell": {}, "provenance": provenance}, indent=2))


def test_check_refuses_results_whose_code_no_commit_holds(tmp_path):
    """Committed code passes; a dirty version with a diff hash never does; a bare legacy "-dirty" passes only with
    its audit's note; nested fields (the MaSF's, the checkpoint's) are checked too."""
    _write(tmp_path, "clean", {"code_version": "0.1.0+abc", "masf": {"code_version": "0.1.0+abc"}})
    assert code_provenance_problems(tmp_path) == []
    _write(tmp_path, "new-dirty", {"code_version": "0.1.0+abc-dirty.0123456789ab",
                                   "code_version_note": "a note does not excuse code no commit holds"})
    _write(tmp_path, "legacy", {"code_version": "0.1.0+abc", "checkpoint_code_version": "0.1.0+def-dirty"})
    _write(tmp_path, "legacy-noted", {"code_version": "0.1.0+abc-dirty", "code_version_note": "code unknown: ..."})
    _write(tmp_path, "nested", {"code_version": "0.1.0+abc", "masf": {"code_version": "0.1.0+abc-dirty.feedfacecafe"}})
    problems = code_provenance_problems(tmp_path)
    assert len(problems) == 3, problems
    assert any("new-dirty" in p for p in problems) and any("checkpoint_code_version" in p for p in problems)
    assert any("masf.code_version" in p for p in problems) and not any("legacy-noted" in p for p in problems)


def test_shipped_results_name_committed_code_or_carry_their_audit():
    """Every shipped result's code versions: committed, or a legacy "-dirty" labelled by
    scripts/archive/relabel_dirty_provenance.py (what `report --check` enforces)."""
    assert code_provenance_problems(runtime.PROJECT_ROOT / "results") == []


def test_a_dirty_run_whose_diff_is_a_later_commit_is_relabelled_to_that_commit(checkout, monkeypatch):
    """A run on a copy whose git metadata was older (a lent GPU machine) records `C-dirty.D`; when a later commit X
    has exactly that code diff from C, the audit relabels it to X and keeps what was recorded; another diff stays."""
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "archive" / "relabel_dirty_provenance.py"
    spec = importlib.util.spec_from_file_location("relabel_dirty_provenance", script)
    relabel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(relabel)
    monkeypatch.setattr(relabel, "PROJECT_ROOT", checkout)
    (checkout / "engine" / "compute.py").write_text("x = 2\n")
    recorded = _version()
    _git(checkout, "commit", "-qam", "the code the run had")
    later = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                           text=True, check=True).stdout.strip()
    history = relabel.History()
    clean, note = relabel.diff_verdict(history, recorded)
    assert clean == f"0.1.0+{later}" and recorded.split("-dirty.")[1] in note
    other = recorded.split("-dirty.")[0] + "-dirty.0123456789ab"
    assert relabel.diff_verdict(history, other)[0] is None
