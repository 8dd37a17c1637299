"""One way to run a sweep: cells computed in this process, on a local process pool or on a Ray cluster, with
the same results whatever the back end, resumable, and tolerant of workers that die and cells that fail.

A sweep is a list of cells (frozen dataclasses with a `key()` dict: what the cell computes) and one module-level
function `compute(cell, context) -> CellResult` (the cell's tidy rows and its provenance). The executor skips
the cells already in the results store, sends the others to the back end, and writes each finished cell from
the driver, atomically (engine.atomic through ResultsStore.write_cell), so:

- a worker process or node that dies mid-cell (SIGKILL, node lost) has its cell run again on another worker
  (local pool: the worker is respawned; Ray: the task's `max_retries`), and the cell is written once;
- a driver killed mid-sweep leaves only whole cells; the next run skips them (none is recomputed) and computes
  the rest;
- a cell whose compute raises is recorded with its full traceback (in the report, the log and
  `<store>/<run>/failed/<key>.txt`) and the others go on.

    from engine.sweeps import Backend, run_cells
    report = run_cells(cells, compute_cell, store, "my-run", backend=Backend.from_options(workers=2, ray=None))

Only the driver writes to the store, so Ray nodes need the code, the environment and the models cache, but no
shared results folder.
"""
from __future__ import annotations

from engine.sweeps.cells import CellContext, CellResult, check_same_weights, pending_cells
from engine.sweeps.executor import Backend, run_cells
from engine.sweeps.provenance import provenance
from engine.sweeps.report import SweepReport

__all__ = ["Backend", "CellContext", "CellResult", "SweepReport", "check_same_weights", "pending_cells",
           "provenance", "run_cells"]
