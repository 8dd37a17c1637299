"""`python -m engine explain` shows its progress on a terminal (with smollm2-rt-prompt it printed
nothing for minutes after its conversion bar): the loading step, then each measure as it starts and ends, on
stderr only, so an export written to stdout stays exactly the export."""
from __future__ import annotations

import io
import json
import re

import pytest

from engine.cli import main
from engine.models import save_classifier

pytestmark = pytest.mark.usefixtures("one_thread")


class Terminal(io.StringIO):
    """A captured stream that says it is a terminal, as an interactive user's stderr is."""

    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_names_the_loading_and_every_measure_in_order(models_cache, toy_classifier, monkeypatch,
                                                                            capsys):
    save_classifier(toy_classifier, "toy-progress")
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["explain", "--model", "toy-progress", "--text", "a gorgeous, witty film", "--measure", "grad-l2",
                 "loo-sign", "--format", "json"]) == 0
    lines = terminal.getvalue().splitlines()
    assert lines[0] == "loading toy-progress ..."
    assert re.fullmatch(r"loaded toy-progress in \d+\.\d s; classifying the text and explaining it with 2 measure\(s\) \.\.\.",
                        lines[1]), lines
    assert lines[2] == "[1/2] grad-l2 ..." and re.fullmatch(r" +grad-l2 done in \d+\.\d s", lines[3]), lines
    assert lines[4] == "[2/2] loo-sign ..." and re.fullmatch(r" +loo-sign done in \d+\.\d s", lines[5]), lines
    record = json.loads(capsys.readouterr().out)  # stdout holds the export alone
    assert set(record["measures"]) == {"grad-l2", "loo-sign"}


def test_no_progress_lines_when_stderr_is_not_a_terminal(models_cache, toy_classifier, capsys):
    save_classifier(toy_classifier, "toy-progress")
    assert main(["explain", "--model", "toy-progress", "--text", "a gorgeous, witty film", "--measure", "grad-l2"]) == 0
    captured = capsys.readouterr()
    assert "loading" not in captured.err and "[1/1]" not in captured.err
    assert "grad-l2" in captured.out
