"""Benchmark sweeps: recursive-masking curves for every cell (checkpoint x dataset x measure x seed),
written to the results store, resumable, in this process, on a local process pool or a Ray cluster (engine.sweeps).

A cell explains the gold label of every example of a split (as both papers do), masks recursively
by the measure, and records the dataset metric and MaSF p-values per step. The random baseline is
the measure `random` with the cell's seed. Cells already in the store are skipped, so an
interrupted sweep resumes where it stopped.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import pandas as pd

from engine.errors import InvalidInputError
from engine.results.store import schedule_columns
from engine.sweeps import Backend, CellContext, CellResult, SweepReport, provenance, run_cells
from engine.sweeps.cells import shared_lock

# The sweep machinery (cells, executors, Ray options) lives in engine.sweeps; this module holds the recursive-masking
# sweep's cells.
__all__ = ["Cell", "compute_cell", "ensure_masf", "run_cell", "run_sweep"]

@dataclass(frozen=True)
class Cell:
    model: str  # checkpoint id in models_cache
    dataset: str
    measure: str
    seed: int
    split: str = "test"
    ratios: tuple[float, ...] = tuple(i / 10 for i in range(11))
    limit: int | None = None
    options: tuple[tuple[str, object], ...] = ()
    counts: tuple[int, ...] | None = None  # count mode (k tokens per input, e.g. 0..10) instead of ratios
    whole_words: bool = False  # mask whole words: the schedule counts words (a labelled variant of the schedule)
    masf: bool = True  # MaSF p-values per step; False skips the fit (its curves and RACU are the same, p-values NaN)

    def __post_init__(self):
        if self.counts is not None:
            if self.ratios:
                raise InvalidInputError("a cell masks by ratios or by counts, not both (give ratios=())")
            counts = list(self.counts)
            if not counts or counts[0] != 0 or counts[-1] < 1 or any(b <= a for a, b in zip(counts, counts[1:])):
                raise InvalidInputError(f"counts must start at 0, increase and reach at least 1, got {self.counts}")

    def key(self) -> dict:
        d = asdict(self)
        d["options"] = dict(self.options)
        if self.counts is None:
            del d["counts"]  # the key of a ratio cell stays what it was before count mode, so old runs resume
        if not self.whole_words:
            del d["whole_words"]  # likewise: token-level cells keep their keys
        if self.masf:
            del d["masf"]  # likewise: cells with MaSF keep their keys
        return d


def compute_cell(cell: Cell, context: CellContext) -> CellResult:
    """Compute one cell (the sweep's compute function; runs wherever the executor sends it).

    Args:
        cell: the Cell.
        context: command (recorded in provenance; default this function's name) and progress(done, total):
            examples finished in this cell (called after each batch).

    Returns:
        CellResult: one tidy row per masking step, with the step's metric value, MaSF p-value, share of
        inputs called out of distribution, mean probability and cost per explanation; and the provenance.
    """
    from engine.data import get_dataset
    from engine.faithfulness.cost import CostMeter
    from engine.faithfulness.recursive import dataset_masking_curve
    from engine.importance import get_explainer, seed_options
    from engine.importance.completeness import CompletenessMeter
    from engine.models import load_classifier
    from engine.ood import load_or_fit_masf
    from engine.runtime import configure, seed_everything

    configure()
    seed_everything(cell.seed)
    started = time.time()
    classifier = load_classifier(cell.model)
    meta = classifier.meta
    # Calibrated on the cell's data, never another dataset's. Cells of one checkpoint running at once take the
    # fit in turn: the first fits and stores it, the others load it (no model loaded twice to fit it beforehand).
    # A large LM's fit (a forward of the whole validation split) can cost more than its curves on a small
    # subset: `--no-masf` skips it.
    masf = None
    if cell.masf:
        with shared_lock(f"masf-{cell.model}-{cell.dataset}"):
            masf = load_or_fit_masf(classifier, cell.dataset)
    dataset = get_dataset(cell.dataset, meta.split_seed)
    options = dict(cell.options)
    explainer = get_explainer(cell.measure, classifier, **seed_options(cell.measure, cell.seed), **options)
    # Cost (docs/methods.md#sanity-checks-and-cost): wall time and model rows of every explanation the curve needed.
    meter = CostMeter(classifier.counted_module)
    explainer.attribute = meter.wrap(explainer.attribute)
    completeness = CompletenessMeter(cell.measure)  # did IG / DeepLift / GradientSHAP's scores add up at every step?
    explainer.attribute = completeness.wrap(explainer.attribute)
    schedule = "count" if cell.counts is not None else "ratio"
    levels = list(cell.counts if cell.counts is not None else cell.ratios)
    rows = dataset_masking_curve(classifier, explainer, dataset, split=cell.split,
                                 ratios=None if cell.counts is not None else cell.ratios, counts=cell.counts, masf=masf,
                                 limit=cell.limit, progress=context.progress, whole_words=cell.whole_words)
    n_examples = len(dataset.split(cell.split)[: cell.limit])
    cost = meter.summary()  # per explanation = one attribute call on one input (a masking step of one example)
    tidy = pd.DataFrame([{
        "model": cell.model, "seed": cell.seed, "dataset": cell.dataset, "split": cell.split, "measure": cell.measure,
        "strategy": meta.strategy, "step": r["step"],
        **schedule_columns(schedule, levels[r["step"]], levels[-1], cell.whole_words), "metric": r["metric"],
        "value": r["value"], "p_value": r.get("p_value_simes", float("nan")),
        "p_below_005": r.get("p_below_005", float("nan")),
        "mean_probability": r["mean_probability"], "base_model": meta.base_model,
        # The examples the curve averages over (the first n of the split): the summary compares a measure only
        # with the random curve of the same examples, so a subset (beam) and the whole split share one run.
        "n_examples": n_examples, "seconds_per_explanation": cost["seconds_per_explanation"],
        "forward_rows_per_explanation": cost["forward_rows_per_explanation"],
        "backward_rows_per_explanation": cost["backward_rows_per_explanation"],
    } for r in rows])
    record = provenance(context.command or "engine.faithfulness.benchmark.run_cell", started, classifier, masf=masf,
                        n_examples=n_examples, measure_options=options, target="gold label", split=cell.split,
                        cost=cost, **({"completeness": summary} if (summary := completeness.summary()) else {}))
    return CellResult(tidy, record)


def run_cell(cell: Cell, results_dir: str | None = None, run: str = "default",
             progress: Callable[[int, int], None] | None = None, command: str | None = None) -> dict:
    """Compute one cell in this process and write it to the store (`compute_cell`, then the store's atomic write).

    Args:
        cell: the Cell.
        results_dir: the store's root (default: the settings' results folder).
        run: the run folder.
        progress: progress(done, total): examples finished in this cell.
        command: the command line recorded in provenance.

    Returns:
        The cell's key.
    """
    from engine.results import ResultsStore

    result = compute_cell(cell, CellContext(command=command, progress=progress))
    ResultsStore(results_dir).write_cell(run, cell.key(), result.rows, result.provenance)
    return cell.key()


def ensure_masf(pairs: Sequence[tuple[str, str | None]]) -> None:
    """Fit and store the MaSF of every (checkpoint, dataset) pair that has none calibrated on that dataset yet (a
    no-op for those that have one; dataset None: the checkpoint's own). Sweeps no longer call it (each cell fits
    or loads its MaSF under a lock); kept for scripts that prepare a models cache before a sweep."""
    from engine.errors import EngineError
    from engine.models import load_classifier
    from engine.ood import load_or_fit_masf

    for model, dataset in pairs:
        try:
            load_or_fit_masf(load_classifier(model), dataset)
        except EngineError:  # a missing or broken checkpoint, an unknown dataset, other labels: its cells fail and
            continue  # are reported one by one; anything else is a bug and stops the sweep with its traceback


def run_sweep(cells: Sequence[Cell], run: str = "default", results_dir: str | None = None, workers: int = 1,
              ray_address: str | None = None, progress: Callable[[int, int, dict], None] | None = None,
              cell_progress: Callable[[Cell, int, int], None] | None = None, command: str | None = None,
              backend: Backend | None = None, started: Callable[[dict, str], None] | None = None) -> SweepReport:
    """Run every cell not yet in the store (engine.sweeps.run_cells with `compute_cell`).

    Args:
        cells: the sweep's cells.
        run: the run folder in the store.
        results_dir: the store's root (default: the settings' results folder).
        workers: > 1: a local process pool of that many workers.
        ray_address: run on Ray: 'auto', 'local' or the head's address (wins over workers).
        progress: progress(i, total, key) after each cell.
        cell_progress: cell_progress(cell, examples done, examples total) within a cell, in the one-process
            path only (a cell of a larger encoder on a whole split is long on a CPU).
        command: the command line recorded in provenance.
        backend: an explicit engine.sweeps.Backend (wins over workers and ray_address).
        started: started(key, where) when a cell is sent to a worker.

    Returns:
        The SweepReport.
    """
    from engine.results import ResultsStore

    backend = backend or Backend.from_options(workers=workers, ray=ray_address)
    return run_cells(cells, compute_cell, ResultsStore(results_dir), run, backend=backend, command=command,
                     progress=progress, cell_progress=cell_progress, started=started)
