"""Compute functions for the sweep tests, importable by spawned pool workers and Ray workers (tests/ is put on
their path): a real benchmark cell that, on its first attempt, announces it is mid-cell and waits to be killed."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from engine.faithfulness.benchmark import compute_cell
from engine.sweeps import CellContext, CellResult


def compute_and_wait_to_be_killed(cell, context: CellContext, marker_dir: str, victim: str):
    """compute_cell; for the cell whose measure and seed are `victim` ('measure/seed'), the first time it runs
    anywhere: after its first batch of examples (truly mid-cell) write this process's pid to
    <marker_dir>/victim.pid and sleep, so the test can SIGKILL the process holding the cell. Later attempts
    (the marker exists) run through, as do the other cells."""
    marker = Path(marker_dir) / "victim.pid"
    if f"{cell.measure}/{cell.seed}" != victim or marker.exists():
        return compute_cell(cell, context)

    def announce(done, total):
        if not marker.exists():
            tmp = marker.with_suffix(".tmp")
            tmp.write_text(str(os.getpid()))
            tmp.rename(marker)
            time.sleep(120)  # killed here by the test; if not, the test fails on the report's retries

    return compute_cell(cell, CellContext(command=context.command, progress=announce))


@dataclass(frozen=True)
class NumberCell:
    """A cell that costs nothing to compute (for executor tests that are about processes, not models)."""

    n: int

    def key(self) -> dict:
        return {"model": "none", "dataset": "none", "measure": "square", "seed": self.n}


def compute_square(cell: NumberCell, context: CellContext) -> CellResult:
    """One tidy row whose value is n squared, and the pid that computed it."""
    rows = pd.DataFrame([{"model": "none", "seed": cell.n, "dataset": "none", "measure": "square", "strategy": None,
                          "step": 0, "ratio": 0.0, "metric": "square", "value": float(cell.n ** 2), "p_value": None}])
    return CellResult(rows, {"command": context.command, "pid": os.getpid()})


def compute_square_noting_the_environment(cell: NumberCell, context: CellContext) -> CellResult:
    """compute_square, with the worker's ENGINE_TEST_MARK and ENGINE_THREADS in the provenance."""
    result = compute_square(cell, context)
    return CellResult(result.rows, {**result.provenance, "mark": os.environ.get("ENGINE_TEST_MARK"),
                                    "threads": os.environ.get("ENGINE_THREADS")})
