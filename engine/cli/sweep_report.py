"""The closing lines every sweep command prints from its engine.sweeps.SweepReport (stdlib only at import time)."""
from __future__ import annotations

import sys


def print_sweep_report(report, what: str = "cells", where: str | None = None) -> None:
    """'N <what> computed, M already in the store, K failed [-> where]' on stdout, then one line per failed cell
    (its error and traceback file) and per cell retried after its worker died, on stderr.

    Args:
        report: the engine.sweeps.SweepReport of the sweep.
        what: the name of its cells in the summary line ('curves', 'cells').
        where: the run folder, shown when given.
    """
    line = f"{len(report.done)} {what} computed, {len(report.skipped)} already in the store, {len(report.failed)} failed"
    print(line + (f" -> {where}" if where else "") + (f" (back end: {report.backend})" if report.backend != "process" else ""))
    for key, why in report.retried:
        print(f"  retried {_label(key)}: {why}", file=sys.stderr)
    for key, error in report.failed:
        print(f"  failed {_label(key)}: {error}", file=sys.stderr)


def _label(key: dict) -> str:
    return " ".join(str(key[k]) for k in ("model", "measure", "method", "check", "budget", "seed") if k in key)
