"""What a sweep is made of: cells (frozen dataclasses with a `key()` dict), what computing one gives
(`CellResult`), what a compute function is told (`CellContext`), and which cells of a run are still to do."""
from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import pandas as pd

from engine.errors import InvalidInputError


class Cell(Protocol):
    """A unit of a sweep: a frozen (hashable, picklable) dataclass whose `key()` describes everything that decides
    its result (a JSON-able dict; the store names its files by it). Cells with a `model` attribute (a checkpoint
    id) are checked against the weights the run's earlier cells used."""

    def key(self) -> dict: ...


@dataclass
class CellResult:
    """What computing one cell gives; the executor writes it to the store.

    Attributes:
        rows: the tidy rows (pandas DataFrame with at least the store's TIDY_COLUMNS).
        provenance: JSON-able dict (`engine.sweeps.provenance(...)` plus the cell's own fields).
    """

    rows: pd.DataFrame
    provenance: dict


@dataclass
class CellContext:
    """What a compute function is given beside its cell.

    Attributes:
        command: the command line recorded in provenance (None: the compute function names itself).
        progress: progress(done, total) within the cell (examples finished), or None; only in-process.
        should_stop: returns True when the user cancelled (checked between batches), or None; only in-process.
        attempt: 1 on the first run of the cell, 2 when it is run again after its worker died, ...
    """

    command: str | None = None
    progress: Callable[[int, int], None] | None = None
    should_stop: Callable[[], bool] | None = None
    attempt: int = 1


def _paired_examples(cell: dict) -> tuple:
    """What makes two cells' results comparable (a measure and its random baseline): the same checkpoint id
    on the same examples (split, limit) and levels."""
    return (cell.get("model"), cell.get("split", "test"), cell.get("limit"), tuple(cell.get("ratios") or ()),
            tuple(cell.get("counts") or ()))


def check_same_weights(store, run: str, cells: Sequence) -> None:
    """Refuse, before any work, cells whose checkpoint's weights differ from those recorded by the run's cells
    they would be compared with.

    A run is built up over sessions and machines, and models_cache is not shipped: a checkpoint id retrained on
    another CPU keeps its test metrics but not its weights bit for bit (other vector kernels), so a new measure
    curve would be paired with a random curve of another model. Cells written before the weights were recorded,
    and cells without a `model`, cannot be checked and are let be.

    Args:
        store: the ResultsStore of the run.
        run: the run's name.
        cells: the cells about to be computed.

    Raises:
        InvalidInputError: naming both hashes.
    """
    from engine.models.checkpoint import reference_weights_sha256

    recorded: dict[tuple, set[str]] = {}
    for entry in store.provenance(run) if (store.root / run / "cells").is_dir() else []:
        sha = entry.get("provenance", {}).get("checkpoint_sha256")
        if sha:
            recorded.setdefault(_paired_examples(entry.get("cell", {})), set()).add(sha)
    current: dict[str, str | None] = {}
    for cell in cells:
        model = getattr(cell, "model", None)
        before = recorded.get(_paired_examples(cell.key())) if model else None
        if not before:
            continue
        if model not in current:
            current[model] = reference_weights_sha256(model)
        now = current[model]
        if now is not None and now not in before:
            raise InvalidInputError(
                f"run {run!r} holds cells of {model} on these examples computed from other weights "
                f"(sha256 {', '.join(sorted(s[:12] for s in before))}; this checkpoint: {now[:12]}), e.g. retrained on "
                f"another machine: its curves would be compared with another model's. Use another --run, or "
                f"another --limit/--split for the new examples.")


def pending_cells(store, run: str, cells: Sequence, skipped: list | None = None, check_weights: bool = True) -> list:
    """The cells of `run` not yet in `store`, in their order (duplicates once), after checking, before any work,
    that they come from the same weights as the run's cells they will be compared with.

    A cell counts as stored only once both its rows and its provenance are there (the store writes the
    provenance last, each file atomically), so a cell half-written by a killed driver is computed again.

    Args:
        store: the ResultsStore of the run.
        run: the run's name.
        cells: every cell of the sweep.
        skipped: a list the keys of the stored cells are appended to, or None.
        check_weights: run `check_same_weights` on the pending cells.

    Returns:
        The cells to compute.
    """
    todo, seen = [], set()
    for cell in cells:
        text = json.dumps(cell.key(), sort_keys=True, default=str)
        if text in seen:
            continue
        seen.add(text)
        if store.has_cell(run, cell.key()):
            if skipped is not None:
                skipped.append(cell.key())
        else:
            todo.append(cell)
    if check_weights:
        check_same_weights(store, run, todo)
    return todo


@contextlib.contextmanager
def shared_lock(name: str) -> Iterator[None]:
    """Hold an exclusive lock named `name` across the processes of this machine (and of nodes sharing the models
    cache): a file lock in `<models cache>/.locks/`. Cells of one checkpoint that would each fit the same MaSF at
    once take it in turn, so the first fits and stores it and the others load it.

    Args:
        name: what is locked (any text; unsafe characters are replaced).
    """
    from filelock import FileLock

    import engine.settings as settings

    folder = settings.models_cache_dir() / ".locks"
    folder.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name)[:150]
    with FileLock(str(folder / f"{safe}.lock")):
        yield
