"""scripts/tools/study_server_drill.py fails (exit status 1) when any property of the server drill fails, not only
when it crashes: its `verdict` names each broken property. The drill itself (a Streamlit server, headless
Chromium, a SIGKILL) runs in CI through its --smoke mode in tests/architecture/test_smoke_entrypoints.py."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "tools" / "study_server_drill.py"


@pytest.fixture(scope="module")
def drill():
    spec = importlib.util.spec_from_file_location("study_server_drill", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PASSING = {"lost_at_kill": 0, "lost": 0, "tasks": 6, "tasks_exact": 6, "tasks_over": 0, "duplicate_items": 0,
           "unfinished": [], "integrity": "ok", "errors": [], "killed_mid_study": True}


def test_a_clean_run_passes(drill):
    assert drill.verdict(PASSING) == []


@pytest.mark.parametrize("broken, words", [
    ({"lost_at_kill": 1}, "missing right after the SIGKILL"),
    ({"lost": 2}, "missing at the end"),
    ({"tasks_exact": 5}, "exactly their overlap"),
    ({"tasks_over": 1}, "exactly their overlap"),
    ({"duplicate_items": 1}, "given twice"),
    ({"unfinished": ["annotator-03"]}, "not finished"),
    ({"integrity": "*** in database main ***"}, "integrity"),
    ({"errors": ["TimeoutError: ..."]}, "errors"),
    ({"killed_mid_study": False}, "mid-study"),
    ({"stopped_on_sigterm": False}, "SIGTERM"),
])
def test_each_broken_property_fails_the_drill(drill, broken, words):
    """A lost answer, a task off its overlap, an item given twice, an unfinished annotator, a damaged file, an
    error, a kill that came before or after the study, or a server that did not exit on SIGTERM: each one makes the
    drill fail, naming it."""
    failed = drill.verdict({**PASSING, **broken})
    assert len(failed) == 1 and words in failed[0], failed

