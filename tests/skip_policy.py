"""A pytest plugin (registered by tests/conftest.py's pytest_configure): with ENGINE_STRICT_SKIPS=1, which `.ci/run` sets, a skipped
test fails the run unless its reason matches a pattern in tests/expected_skips.txt.

Why: a test that skips when its precondition is absent (a package not installed, Chromium missing, a shipped run
deleted) turns a broken environment into a green run. In CI every precondition is installed, so a skip is a
failure unless it was named beforehand (e.g. "no CUDA device" on a machine without a GPU). Outside CI (a quick
`pytest` on a laptop without Chromium) skips stay skips and are listed at the end of the run.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ALLOW_LIST = Path(__file__).with_name("expected_skips.txt")


def expected_patterns(path: Path | None = None) -> list[re.Pattern]:
    """The allow-list's regular expressions: one per line, '#' starts a comment, blank lines ignored. `path`:
    the file, by default $ENGINE_EXPECTED_SKIPS if set (tests of this plugin), else tests/expected_skips.txt."""
    path = path or Path(os.environ.get("ENGINE_EXPECTED_SKIPS") or ALLOW_LIST)
    if not path.is_file():
        return []
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [re.compile(line) for line in lines if line]


def _reason(report) -> str:
    # a skip's longrepr is (file, line, "Skipped: reason")
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


class _StrictSkips:
    def __init__(self) -> None:
        self.patterns = expected_patterns()
        self.unexpected: list[tuple[str, str]] = []

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = _reason(report)
            if not any(p.search(reason) for p in self.patterns):
                self.unexpected.append((report.nodeid, reason))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session) -> None:
        if self.unexpected and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.unexpected:
            return
        terminalreporter.section("skips not in tests/expected_skips.txt (ENGINE_STRICT_SKIPS=1: each fails the run)")
        for nodeid, reason in self.unexpected:
            terminalreporter.line(f"{nodeid}: {reason}")


def register(config) -> None:
    """Register the strict-skips plugin when ENGINE_STRICT_SKIPS=1, on the controller only."""
    # only the controller counts (xdist forwards every worker's reports to it); a worker's count would double them
    if os.environ.get("ENGINE_STRICT_SKIPS") == "1" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_StrictSkips(), "strict-skips")
