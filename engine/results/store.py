"""The results store the benchmark pages read: tidy parquet cells with JSON provenance.

Layout: <root>/<run>/cells/<key>.parquet and <key>.json, one pair per cell (model x seed x dataset x
measure ...). Each cell is written to a temporary name and renamed, so a run that is interrupted
leaves only whole cells behind and resumes by skipping the cells that exist; parallel workers (local
processes or Ray) write different files and never contend for a lock.

Rows are tidy: one row per (model, seed, dataset, split, measure, strategy, step) with the metric value, the
MaSF p-value, the number of examples averaged over and the masking schedule (`schedule`: ratio, quantile
or count; `strategy` is the checkpoint's fine-tuning strategy, masked or plain), so the app filters and
plots with plain pandas.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

import engine.settings as settings
from engine.atomic import atomic_path, write_text
from engine.errors import InvalidInputError

TIDY_COLUMNS = ("model", "seed", "dataset", "measure", "strategy", "step", "ratio", "metric", "value", "p_value")
RECURSIVE_MASKING = "recursive masking"  # the method of cells without retraining (FMM)
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def schedule_columns(schedule: str, level: float, last_level: float, whole_words: bool = False) -> dict:
    """The x-axis columns of one step's tidy row.

    schedule: "ratio" (recursive masking, FMM) or "quantile" (ROAR): `level` is the share of each input's
    maskable tokens, stored as `ratio`; "count": `level` is k tokens per input (capped at the input's length),
    stored as `count`, with `ratio` = k / k_max so that ACU, the area over x, stays the mean gap over the
    schedule on the same scale as in the other schedules (x = k itself would inflate it by k_max: 10x for
    the default 1..10). The stored label is "count 0..k_max": curves up to different k_max share no x-axis,
    and the label keeps them in different groups of the summary. whole_words: the schedule counted words, each
    masked whole; the label says so (", whole words"), so word and token curves are never pooled.
    """
    if whole_words:
        columns = schedule_columns(schedule, level, last_level)
        return {**columns, "schedule": columns["schedule"] + WHOLE_WORDS}
    if schedule == "count":
        if last_level < 1:
            raise InvalidInputError(f"a count schedule must reach at least 1 token, got k_max = {last_level}")
        return {"schedule": f"count 0..{int(last_level)}", "count": int(level), "ratio": float(level) / float(last_level)}
    if schedule not in ("ratio", "quantile"):
        raise InvalidInputError(f"unknown masking schedule {schedule!r}: ratio, quantile or count")
    return {"schedule": schedule, "count": float("nan"), "ratio": float(level)}


WHOLE_WORDS = ", whole words"  # suffix of the schedule label of whole-word masking


def is_count_schedule(schedule: str) -> bool:
    """Whether a stored `schedule` label is a count schedule ("count 0..10"), whose x-axis is k tokens."""
    return str(schedule).startswith("count")


def default_results_dir() -> Path:
    return settings.results_dir()


def cell_key(cell: dict) -> str:
    """A stable file name for a cell: readable prefix + hash of its full description."""
    text = json.dumps(cell, sort_keys=True, default=str)
    readable = "_".join(str(cell[k]) for k in ("model", "dataset", "measure", "seed") if k in cell)
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", readable)[:80]
    return f"{readable}_{hashlib.sha256(text.encode()).hexdigest()[:12]}"


#: ResultsStore.load's memo: (root, run) -> (fingerprint, rows), oldest first, at most _LOADED_MAX runs
_LOADED: dict[tuple[str, str], tuple[tuple, pd.DataFrame]] = {}
_LOADED_MAX = 16


class ResultsStore:
    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else default_results_dir()

    def _cells_dir(self, run: str) -> Path:
        if not isinstance(run, str) or not _RUN_NAME.fullmatch(run):  # fullmatch: '$' would let a final newline through
            raise InvalidInputError(f"run name {run!r} must be letters, digits, '.', '_' or '-'")
        return self.root / run / "cells"

    def has_cell(self, run: str, cell: dict) -> bool:
        d = self._cells_dir(run)
        key = cell_key(cell)
        return (d / f"{key}.parquet").is_file() and (d / f"{key}.json").is_file()

    def write_cell(self, run: str, cell: dict, rows: pd.DataFrame, provenance: dict) -> Path:
        """Write one cell atomically (the JSON last: a cell counts as done only once both exist)."""
        missing = [c for c in TIDY_COLUMNS if c not in rows.columns]
        if missing:
            raise InvalidInputError(f"result rows lack the columns {missing}")
        d = self._cells_dir(run)
        d.mkdir(parents=True, exist_ok=True)
        key = cell_key(cell)
        with atomic_path(d / f"{key}.parquet") as tmp:
            rows.to_parquet(tmp, index=False)
        write_text(d / f"{key}.json", json.dumps({"cell": cell, "provenance": provenance}, indent=2, default=str))
        return d / f"{key}.parquet"

    def runs(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "cells").is_dir())

    def fingerprint(self) -> tuple[tuple[str, int, int, int], ...]:
        """(path, inode, mtime in ns, size in bytes) of every finished cell's JSON, sorted.

        It changes whenever a cell is written or removed (the JSON is renamed in last, from a new file, so
        even a rewrite of equal size within a coarse mtime tick gets a new inode), and costs one `stat` per
        cell, no parsing: a reader caches `load()` under it (the Benchmarks page, which reruns on every widget
        change, where `load()` of the shipped store takes seconds) and still sees a sweep's new cells.
        """
        entries = []
        for name in self.runs():
            for path in self._cells_dir(name).glob("*.json"):
                stat = path.stat()
                entries.append((str(path.relative_to(self.root)), stat.st_ino, stat.st_mtime_ns, stat.st_size))
        return tuple(sorted(entries))

    def run_fingerprint(self, run: str) -> tuple:
        """(file name, inode, mtime in ns, size) of every cell file of one run: as `fingerprint`, over the parquet
        files too (a reader may load a cell whose JSON is unchanged but whose rows were rewritten). What `load(run)`
        is memoised under, and what a reader that derives tables from a run may key them by."""
        d = self._cells_dir(run)
        if not d.is_dir():
            return ()
        return tuple(sorted((p.name, (st := p.stat()).st_ino, st.st_mtime_ns, st.st_size) for p in d.iterdir()))

    def load(self, run: str | None = None) -> pd.DataFrame:
        """All rows of one run (or of every run), with a `run` column.

        One run's rows are memoised per process under its file fingerprint (one `stat` per cell file): `report`
        reads one run for several tables (the ground-truth card run for nine), and reading its thousands of parquet
        cells was most of `report --check`. A written, rewritten or removed cell changes the fingerprint and rereads the
        run. Each call returns its own copy, so a caller may change it: a shallow one, which pandas' copy-on-write keeps
        apart from the memo (a change copies what it changes), where a deep copy of the card run's numeric columns
        cost a tenth of a second per call."""
        if not run:  # every run at once: its readers (the Benchmarks page) cache it themselves; no second copy here
            return self._load(self.runs())
        key = (str(self.root.resolve()), run)
        fingerprint = self.run_fingerprint(run)
        hit = _LOADED.get(key)
        if hit is not None and hit[0] == fingerprint:
            _LOADED[key] = _LOADED.pop(key)  # most recently used last
            return hit[1].copy(deep=False)
        data = self._load([run])
        _LOADED[key] = (fingerprint, data)
        while len(_LOADED) > _LOADED_MAX:
            _LOADED.pop(next(iter(_LOADED)))
        return data.copy(deep=False)

    def _load(self, runs: list[str]) -> pd.DataFrame:
        frames, grids, names = [], [], []
        for name in runs:
            d = self._cells_dir(name)
            for path in sorted(d.glob("*.parquet")):
                if (path.with_suffix(".json")).is_file():
                    rows = self._read_cell_columns(path)
                    frames.append(rows)
                    grids.append(self._grid(rows))
                    names.append(name)
        if not frames:
            return pd.DataFrame(columns=[*TIDY_COLUMNS, "split", "method", "n_examples", "schedule", "count", "grid", "run"])
        data = pd.concat(frames, ignore_index=True)
        # Each cell's grid and run, added once to the whole frame rather than as two columns of every cell (a third of
        # the reading time of a run of small cells), in the column order of concatenating cells that carried them: each
        # cell's columns, then grid and run, every column where it first appears.
        cell_of_row = np.repeat(np.arange(len(frames)), [len(rows) for rows in frames])
        data["grid"] = pd.array(grids, dtype="str").take(cell_of_row)
        data["run"] = pd.array(names, dtype="str").take(cell_of_row)
        order = list(dict.fromkeys(c for rows in frames for c in (*rows.columns, "grid", "run")))
        if list(data.columns) != order:
            data = data[order]
        # Each string column as one array: concatenating the cells leaves a chunk per cell, and every row selection a
        # reader makes (each `df[mask]`, groupby, pivot) copies a chunked column at ten times the cost of one array,
        # which outweighs joining the chunks once (the ground-truth card run: 280 chunks, 870k rows).
        for column in data.columns:
            if isinstance(data[column].dtype, pd.StringDtype) and data[column].dtype.storage == "pyarrow":
                data[column] = pd.array(data[column].array.__arrow_array__().combine_chunks(), dtype=data[column].dtype)
        # Cells of recursive masking without retraining (benchmark) carry no method column; ROAR cells do.
        if "method" not in data.columns:
            data["method"] = RECURSIVE_MASKING
        data["method"] = data["method"].fillna(RECURSIVE_MASKING)
        # Rows without an example count (ROAR cells, which use whole splits) or a token count (every schedule but
        # count) get NaN, so readers need not check for the columns.
        if "n_examples" not in data.columns:
            data["n_examples"] = float("nan")
        if "count" not in data.columns:
            data["count"] = float("nan")
        return data

    @staticmethod
    def _grid(rows: pd.DataFrame) -> str:
        """The cell's levels ("0,0.1,...,1"; k for count schedules): two cells of one measure and seed masked on
        different grids (e.g. `--ratios` changed within a run) share every other column, and the summary must keep
        them apart rather than pool their points into one curve."""
        counted = len(rows) > 0 and is_count_schedule(rows["schedule"].iloc[0]) and "count" in rows.columns
        levels = rows["count"] if counted else rows["ratio"]
        return ",".join(f"{v:g}" for v in sorted(levels.unique()))

    @staticmethod
    def _read_parquet(path: Path) -> pd.DataFrame:
        """`pd.read_parquet(path)` of a cell, the same frame for a fraction of the time: pandas converts the table that
        pyarrow reads with `to_pandas` (strings to its str dtype; the cells hold no index and no attrs), but reads it
        through pyarrow's dataset layer and thread pool, three times the work on a cell of a few hundred rows (a
        `report` reads a thousand cells). tests/engine/test_results_store.py checks the two agree on every shipped cell."""
        import pyarrow.parquet as pq  # as pandas does: only where parquet is read

        table = pq.ParquetFile(path).read(use_threads=False, use_pandas_metadata=True)
        return table.to_pandas(use_threads=False)

    @staticmethod
    def _read_cell_columns(path: Path) -> pd.DataFrame:
        rows = ResultsStore._read_parquet(path)
        if "schedule" not in rows.columns and "method" not in rows.columns:
            rows["schedule"] = "ratio"  # a benchmark (recursive masking) cell of before `--counts`: ratios only
        if all(c in rows.columns for c in ("n_examples", "schedule", "split")):
            return rows
        # Cells written before the rows carried these columns: their JSON has recorded them from the start.
        recorded = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        if "split" not in rows.columns:
            # Benchmark cells name their split; ROAR cells (no split in their key) evaluate on the test split.
            rows["split"] = recorded.get("cell", {}).get("split") or recorded.get("provenance", {}).get("split") or "test"
        if "n_examples" not in rows.columns:
            # ROAR cells, which use whole splits, have none and stay NaN.
            n_examples = recorded.get("provenance", {}).get("n_examples")
            if n_examples is not None:
                rows["n_examples"] = int(n_examples)
        if "schedule" not in rows.columns:
            # A ROAR cell's key names its strategy (quantile or count; older cells stored a count level as
            # `ratio`, so it is rescaled here as schedule_columns does).
            strategy = recorded.get("cell", {}).get("strategy")
            if strategy == "count":
                last = rows["ratio"].max()
                rows["count"] = rows["ratio"].round().astype(int)
                rows["ratio"] = rows["ratio"] / last
                rows["schedule"] = f"count 0..{int(round(last))}"
            else:
                rows["schedule"] = "quantile" if strategy == "quantile" else "ratio"
        return rows

    def provenance(self, run: str) -> list[dict]:
        d = self._cells_dir(run)
        return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(d.glob("*.json"))]
