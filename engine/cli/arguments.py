"""Argument types and printed tables that several commands share (stdlib only at import time)."""
from __future__ import annotations

import argparse
import os
import sys


def ratios(text: str) -> tuple[float, ...]:
    """'0,0.1,0.5,1' -> (0.0, 0.1, 0.5, 1.0)."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"ratios must be comma-separated numbers like 0,0.1,0.5,1, got {text!r}") from None
    return values


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def workers(text: str) -> int:
    """`auto`: on a CPU one local worker process per two cores (the cores are divided between them), so one,
    in this process, on a 2-core machine; with CUDA one."""
    if text == "auto":
        import torch

        if torch.cuda.is_available():
            return 1  # one process keeps the GPU busy; more would each hold a CUDA context on the same card
        return max(1, (os.cpu_count() or 2) // 2)
    return positive_int(text)


def add_split_arguments(parser: argparse.ArgumentParser) -> None:
    """`--split` (default test) and `--limit N` (default: the whole split): the examples a command evaluates."""
    parser.add_argument("--split", default="test", help="dataset split. Default: test")
    parser.add_argument("--limit", type=int, default=None, help="only the first N examples of the split")


def add_run_argument(parser: argparse.ArgumentParser, folder: str, default: str = "default") -> None:
    """`--run NAME`: the run folder under `<results>/<folder>/` that the command's cells are stored in."""
    parser.add_argument("--run", default=default, help=f"run folder in <results>/{folder}/. Default: {default}")


def database_options() -> argparse.ArgumentParser:
    """The parent parser (`parents=[...]`) of every subcommand that reads the annotation database: `--db`.
    Read it back with `annotation_database(args, ...)`."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=None, help="the annotation database (default: ENGINE_ANNOTATIONS_DB or "
                        "annotations/annotations.sqlite3)")
    return common


def annotation_database(args: argparse.Namespace, create: bool, first: str) -> str:
    """The annotation database's path that `--db` names (default: the settings' one). Unless `create`, a path
    with no file there raises AnnotationStoreError, saying what to do `first` (e.g. 'annotate on the dashboard
    first') or to pass --db."""
    from engine.annotation import AnnotationStoreError, default_db_path

    path = args.db or default_db_path()
    if not create and not os.path.isfile(path):
        raise AnnotationStoreError(f"no annotation database at {path} ({first}, or pass --db)")
    return path


def print_listing(entries: list[dict], line, broken) -> None:
    """One printed line per entry of a listing (checkpoints, registered models, datasets): `line(entry)`, or
    `broken(entry)` for an entry that could not be read (it carries an `error`)."""
    for entry in entries:
        print(broken(entry) if "error" in entry else line(entry))


def print_area_table(run: str) -> None:
    """ACU / RACU (mean over seeds, 95% BCa CI) of every method and measure in the run, as markdown."""
    import pandas as pd

    from engine.errors import EngineError
    from engine.faithfulness.summary import area_metrics_table
    from engine.results import ResultsStore

    try:
        table = area_metrics_table(ResultsStore().load(run))
    except EngineError as err:  # e.g. two checkpoints for one seed: the cells are written, only the summary fails
        print(f"warning: no ACU/RACU table for run {run!r}: {err}", file=sys.stderr)
        return
    if table.empty:
        return

    def interval(low, high, used):
        return f"{low:.1f} to {high:.1f}" if pd.notna(low) else f"no CI: {used}"

    several_grids = table["grid"].nunique() > 1
    several_splits = table["split"].nunique() > 1  # ResultsStore.load gives every row a split
    print("\n| dataset | model | method | examples | measure | seeds | ACU % (95% CI) | RACU % (95% CI) | RACU clipped % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in table.itertuples():
        examples = "whole splits" if pd.isna(r.n_examples) else int(r.n_examples)
        schedule, _, whole_words = r.schedule.partition(",")  # "count 0..10, whole words" counts words
        unit = "words" if whole_words else "tokens"
        method = (r.method + (f" ({whole_words.strip()})" if whole_words else "") if schedule in ("ratio", "quantile")
                  else f"{r.method} ({schedule} {unit}: x = k / k_max)")
        if several_grids:  # the run masked on more than one list of levels: each is its own comparison
            method += f" (levels {r.grid})"
        if several_splits:
            examples = f"{examples} ({r.split})"
        print(f"| {r.dataset} | {r.base_model} | {method} | {examples} | {r.measure} | {r.seeds} | {r.acu_pct:.1f} "
              f"({interval(r.acu_low, r.acu_high, r.acu_ci)}) | {r.racu_pct:.1f} ({interval(r.racu_low, r.racu_high, r.racu_ci)}) | "
              f"{r.racu_clipped_pct:.1f} |")


def add_sweep_arguments(parser: argparse.ArgumentParser, workers_default: str = "auto") -> None:
    """Add the options every sweep command shares: `--workers N|auto` (a local process pool) and
    `--ray ADDRESS|auto|local` (a Ray cluster). Read them back with `sweep_backend(args)`.

    Args:
        parser: the command's parser.
        workers_default: the default of --workers ('auto', or '1' for sweeps that should stay in one process
            unless asked).
    """
    parser.add_argument("--workers", type=workers, default=workers_default,
                        help="local worker processes: a number, or 'auto': on a CPU one per two cores, each with "
                             "two threads (on a 2-core machine one, in this process, which also shows the examples "
                             "done per cell); with a GPU one. A worker that dies mid-cell is replaced and the cell "
                             f"run again. Default: {workers_default}")
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help="run the cells as tasks on a Ray cluster: 'auto' (the cluster started on this machine "
                             "with `ray start`), the head's host:port, or 'local' (a private one-machine cluster). "
                             "Results are the same bits as in one process; a worker or node lost mid-cell has its "
                             "cell retried on another (docs/sweeps.md)")


def sweep_backend(args: argparse.Namespace, max_retries: int = 2):
    """The engine.sweeps.Backend that `--workers` / `--ray` (from `add_sweep_arguments`) ask for.

    Returns:
        engine.sweeps.Backend: 'ray' when --ray is given, a 'pool' for --workers > 1, else 'process'.
    """
    from engine.sweeps import Backend

    return Backend.from_options(workers=getattr(args, "workers", 1), ray=getattr(args, "ray", None),
                                max_retries=max_retries)


class FitProgress:
    """A progress bar for a MaSF fit (or any `progress(done, total)` callback), opened on the first call: a fit
    that finds its stored calibration draws nothing. Use as `with FitProgress("fitting MaSF") as progress:`."""

    def __init__(self, desc: str, unit: str = "input"):
        self.desc, self.unit, self.bar = desc, unit, None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=self.desc, unit=self.unit)
        self.bar.update(done - self.bar.n)

    def __enter__(self) -> FitProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()
