"""Every Python source of the project compiles without a warning. An invalid escape sequence in a string (such as
"\\c" in a help text) is a DeprecationWarning up to Python 3.11 and a SyntaxWarning from 3.12, printed to every user
of the command on a newer Python (seen on the GPU machine's 3.12) and meant to become an error."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for folder in ("engine", "app", "pages", "scripts", "bench", "tests")
                 for p in (ROOT / folder).rglob("*.py"))


def test_the_sources_are_found():
    assert ROOT / "engine" / "cli" / "explain.py" in SOURCES and len(SOURCES) > 100


def test_every_source_compiles_without_a_warning():
    problems = []
    for path in SOURCES:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a compile-time warning becomes a SyntaxError naming file and line
            try:
                compile(path.read_text(encoding="utf-8"), str(path), "exec")
            except SyntaxError as exc:
                problems.append(f"{path.relative_to(ROOT)}:{exc.lineno}: {exc.msg}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("text", ['"LaTeX \\colorbox"'])
def test_the_check_catches_an_invalid_escape(text):
    with warnings.catch_warnings(), pytest.raises(SyntaxError):
        warnings.simplefilter("error")
        compile(text, "<text>", "exec")
