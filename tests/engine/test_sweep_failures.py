"""A sweep cell that fails keeps its full traceback: in the report, in the log and in a file beside the run's cells."""
from __future__ import annotations

import logging

from engine.faithfulness.benchmark import Cell, run_sweep
from engine.faithfulness.evaluation import EvaluationCell, run_suite


def _check_kept(report, root, caplog):
    assert len(report.failed) == 1 and len(report.tracebacks) == 1
    text = report.tracebacks[0]
    # The whole stack down to the frame that raised, not only "TypeName: message".
    assert text.startswith("Traceback (most recent call last)") and "load_classifier" in text
    key, message = report.failed[0]
    written = list((root / report.run / "failed").glob("*.txt"))
    assert len(written) == 1 and str(written[0]) in message
    assert "load_classifier" in written[0].read_text(encoding="utf-8")
    assert any("load_classifier" in record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR)


def test_a_failed_benchmark_cell_keeps_its_traceback(models_cache, tmp_path, caplog):
    report = run_sweep([Cell(model="no-such-checkpoint", dataset="toy", measure="random", seed=0)],
                       run="broken", results_dir=tmp_path)
    _check_kept(report, tmp_path, caplog)


def test_a_failed_evaluation_cell_keeps_its_traceback(models_cache, tmp_path, caplog):
    report = run_suite([EvaluationCell(model="no-such-checkpoint", dataset="toy", measure="random", seed=0)],
                       run="broken", results_dir=tmp_path)
    _check_kept(report, tmp_path, caplog)  # results_dir is the evaluation store itself
