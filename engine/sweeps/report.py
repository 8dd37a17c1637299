"""The one report of a sweep: which cells were computed, skipped (already stored), retried and failed."""
from __future__ import annotations

import json
import logging
import os
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from engine.atomic import write_text

_log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    """What a sweep did, cell keys in the order they finished.

    Attributes:
        run: the run folder in the store.
        done: keys of the cells computed and written by this sweep.
        skipped: keys of the cells already in the store (not recomputed).
        failed: (key, one line naming the error and, when written, its traceback file) per failed cell.
        tracebacks: the full traceback of each failed cell, in the order of `failed`.
        retried: (key, why) each time a cell was sent again because its worker died mid-cell.
        backend: the back end that ran the cells ('process', 'pool' or 'ray').
    """

    run: str
    done: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    failed: list[tuple[dict, str]] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)
    retried: list[tuple[dict, str]] = field(default_factory=list)
    backend: str = "process"

    def fail(self, key: dict, err: BaseException | str, root: str | os.PathLike | None = None) -> None:
        """Record a failed cell with its full traceback: kept here, logged, and (with the store's root) written to
        <root>/<run>/failed/<cell key>.txt, so a sweep that runs on unattended keeps why each cell failed.

        Args:
            key: the cell's key().
            err: the exception (in this process), or the traceback text formatted where the cell ran.
            root: the store's root folder, or None to keep the traceback in memory and the log only.
        """
        from engine.results.store import cell_key

        if isinstance(err, BaseException):
            text = "".join(traceback.format_exception(err))
            message = f"{type(err).__name__}: {err}"
        else:
            text = err
            message = text.strip().splitlines()[-1] if text.strip() else "unknown error"
        self.tracebacks.append(text)
        if root is not None:
            path = Path(root) / self.run / "failed" / f"{cell_key(key)}.txt"
            write_text(path, json.dumps(key, sort_keys=True, default=str) + "\n\n" + text)
            message += f" (traceback: {path})"
        _log.error("cell %s failed:\n%s", key, text)
        self.failed.append((key, message))
