"""ROAR / Recursive ROAR sweeps into the results store (the retraining counterpart of benchmark.py), on
engine.sweeps: in this process, on a local process pool or on a Ray cluster, with the same results.

A cell is (base model config, dataset, measure, seed, method) with method `roar` or `recursive-roar`;
its curve is the test metric of the model retrained at each masking level (engine.faithfulness.roar).
The level-0 model of each seed is trained once, saved in models_cache and shared by every measure and
method of that seed, as in R-ROAR (the first cell of a seed to need it trains it under a lock named after
it; the others wait and load it). Rows are tidy like the recursive-masking cells, with a `method`
column and the measured `masked_fraction` of test tokens; there is no MaSF p-value (the retrained
model sees masked data in training, so in-distribution is by construction), so `p_value` is NaN.

A model-independent measure (`Explainer.model_independent`: the `random` baseline) ranks the same tokens
whatever model it is given: ROAR's fixed random ranking and Recursive ROAR's re-drawn one both mask a uniformly
random nested set of tokens, so one curve per seed is computed (recursively) and stored under every requested
method, marked so in its provenance.
Cells already in the store are skipped: an interrupted sweep resumes.
"""
from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from engine.errors import InvalidInputError
from engine.results.store import schedule_columns

METHODS = ("recursive-roar", "roar")


def _cell(config, measure: str, seed: int, method: str, strategy: str, levels: Sequence[float]) -> dict:
    return {"model": _base_id(config, seed), "dataset": config.dataset, "measure": measure, "seed": seed,
            "method": method, "strategy": strategy, "levels": [float(x) for x in levels],
            "retraining": {"epochs": config.epochs, "lr": config.lr, "batch_size": config.batch_size,
                           "train_limit": config.train_limit, "eval_limit": config.eval_limit}}


def _base_id(config, seed: int) -> str:
    from engine.models import default_model_id

    return default_model_id(replace(config, seed=seed))


def _base_classifier(config, log: Callable[[str], None]):
    """The level-0 model of this config: loaded from models_cache when one with the same training
    config exists, else trained and saved (so later sweeps and the other pages reuse it)."""
    from engine.models.reuse import load_or_train

    return load_or_train(config, _base_id(config, config.seed), log=lambda m: log(f"level-0 model {m}"),
                         other_config_suffix="-roar")




@dataclass(frozen=True, eq=False)
class RoarCell:
    """One computed curve: `measure` on seed `seed`, stored under every method of `methods` (one method, or, for
    a model-independent measure (random), all requested ones). config: the TrainConfig of the level-0 model and of every
    retraining (its seed is replaced by `seed`). key(): the store key of the first method's cell."""

    config: object
    measure: str
    seed: int
    methods: tuple[str, ...]
    strategy: str
    levels: tuple[float, ...]

    @property
    def recursive(self) -> bool:
        from engine.importance import is_model_independent  # the package: every measure registered

        return self.methods[0] == "recursive-roar" or is_model_independent(self.measure)

    def key(self) -> dict:
        return _cell(self.config, self.measure, self.seed, self.methods[0], self.strategy, self.levels)

    def keys(self) -> list[dict]:
        """The store keys of every method this computation serves."""
        return [_cell(self.config, self.measure, self.seed, m, self.strategy, self.levels) for m in self.methods]


def compute_roar_cell(cell: RoarCell, context=None):
    """One (Recursive) ROAR curve (engine.sweeps' compute function): the level-0 model (trained once under a lock
    shared by the seed's cells, or loaded), then one retraining per level. Rows and provenance of the cell's first
    method; `store_siblings` writes the others."""
    from engine.faithfulness.roar import roar_curve
    from engine.importance import is_model_independent
    from engine.runtime import configure
    from engine.sweeps import CellResult, provenance
    from engine.sweeps.cells import shared_lock

    configure()
    started = time.time()
    seed_config = replace(cell.config, seed=cell.seed)
    with shared_lock(f"train {_base_id(cell.config, cell.seed)}"):  # one training of a level-0 model at a time
        base = _base_classifier(seed_config, log=lambda m: None)
    levels = list(cell.levels)
    progress = getattr(context, "progress", None)
    curve = roar_curve(seed_config, cell.measure, recursive=cell.recursive, strategy=cell.strategy, levels=levels,
                       base_classifier=base,
                       progress=None if progress is None else lambda info: progress(info["step"], info["steps"]))
    key = cell.key()
    method = cell.methods[0]
    tidy = pd.DataFrame([{
        "model": base.meta.id if "id" in base.meta.present else key["model"], "seed": cell.seed, "dataset": cell.config.dataset,
        "split": "test", "measure": cell.measure,
        "strategy": base.meta.strategy, "method": method, "step": i,
        **schedule_columns(cell.strategy, level, curve["levels"][-1]),
        "metric": base.meta.metric, "value": value,
        "p_value": math.nan, "p_below_005": math.nan, "masked_fraction": fraction,
        "base_model": base.meta.base_model,
    } for i, (level, value, fraction) in enumerate(zip(curve["levels"], curve["values"], curve["masked_fraction"]))])
    record = provenance(
        getattr(context, "command", None) or "engine.faithfulness.retraining.run_retraining_sweep", started, base,
        method=method, computed_as="recursive-roar" if cell.recursive else "roar",
        note=(f"{cell.measure} is model-independent: one recursively drawn {cell.measure} curve serves every method"
              if is_model_independent(cell.measure) else ""),
        target="gold label", strategy=cell.strategy, levels=levels,
        retrained_test_metrics=[m.get("test") for m in curve["models"]])
    return CellResult(tidy, record)


def store_siblings(store, run: str, cells: Sequence[RoarCell]) -> list[dict]:
    """Write, for every computation that serves several methods (a model-independent measure's), the cells of its other methods from the
    stored first one (rows and provenance with `method` replaced); returns their keys. Idempotent: a driver killed
    between the first cell and its siblings completes them on the next sweep without computing anything."""
    written = []
    for cell in cells:
        if len(cell.methods) < 2 or not store.has_cell(run, cell.key()):
            continue
        rows, record = _stored_cell(store, run, cell.key())
        for method, key in zip(cell.methods[1:], cell.keys()[1:]):
            if store.has_cell(run, key):
                continue
            store.write_cell(run, key, rows.assign(method=method), {**record, "method": method})
            written.append(key)
    return written


def _stored_cell(store, run: str, key: dict) -> tuple[pd.DataFrame, dict]:
    """The rows and provenance of one stored cell, as written."""
    from engine.results.store import cell_key

    folder = store.root / run / "cells"
    name = cell_key(key)
    rows = pd.read_parquet(folder / f"{name}.parquet")
    record = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))["provenance"]
    return rows, record


def roar_cells(config, measures: Sequence[str], seeds: Sequence[int], methods: Sequence[str] = METHODS,
               strategy: str = "quantile", levels: Sequence[float] | None = None) -> list[RoarCell]:
    """The cells of a sweep, checked: a model-independent measure (random) once per seed (its curve serves every
    method), the others per method.
    Raises InvalidInputError for an unknown method, measure, strategy or dataset, or levels out of range."""
    from engine.data import get_dataset
    from engine.faithfulness.roar import DEFAULT_COUNTS, DEFAULT_QUANTILES
    from engine.importance import MEASURES, is_model_independent

    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise InvalidInputError(f"unknown method(s) {unknown}; use {', '.join(METHODS)}")
    missing = [m for m in measures if m not in MEASURES]
    if missing:
        raise InvalidInputError(f"unknown measure(s) {', '.join(missing)}; known: {', '.join(sorted(MEASURES))}")
    if strategy not in ("quantile", "count"):
        raise InvalidInputError(f"unknown strategy {strategy!r}; use quantile or count")
    get_dataset(config.dataset, config.split_seed)  # an unknown dataset fails here, before any training
    levels = tuple(levels or (DEFAULT_QUANTILES if strategy == "quantile" else DEFAULT_COUNTS))
    if strategy == "quantile" and not all(0 < x < 1 for x in levels):
        raise InvalidInputError(f"quantile levels must lie strictly between 0 and 1, got {list(levels)}")
    cells = []
    for seed in seeds:
        for measure in measures:
            groups = [tuple(methods)] if is_model_independent(measure) else [(method,) for method in methods]
            cells += [RoarCell(config, measure, seed, group, strategy, levels) for group in groups]
    return cells


def run_retraining_sweep(config, measures: Sequence[str], seeds: Sequence[int], methods: Sequence[str] = METHODS,
                         strategy: str = "quantile", levels: Sequence[float] | None = None, run: str = "roar",
                         results_dir: str | None = None, log: Callable[[str], None] = print,
                         progress: Callable[[dict], None] | None = None, command: str | None = None,
                         workers: int = 1, ray: str | None = None):
    """Every (seed, measure, method) curve not yet in the store, on the back end `workers` / `ray` ask for
    (engine.sweeps.Backend.from_options). Returns the SweepReport: `done` and `skipped` list every method's cell.

    config: the TrainConfig of the level-0 model and of every retraining (its seed is replaced per seed).
    progress: called with {'trainings_done', 'trainings_total', 'measure', 'methods', 'seed'} after each finished
    cell, and (in this process only) after every retraining; a seed's level-0 model counts as one training."""
    from engine.results import ResultsStore
    from engine.sweeps import Backend, run_cells

    cells = roar_cells(config, measures, seeds, methods, strategy, levels)
    store = ResultsStore(results_dir)
    store_siblings(store, run, cells)  # complete a computation a killed driver stored under its first method only
    todo = [c for c in cells if not store.has_cell(run, c.key())]
    n_levels = len(cells[0].levels) if cells else 0
    total = len(todo) * n_levels + len({c.seed for c in todo})
    by_key = {_text(c.key()): c for c in todo}
    finished = {"trainings": 0, "seeds": set()}

    def report_progress(cell, within: int):
        if progress is not None:
            progress({"trainings_done": finished["trainings"] + within, "trainings_total": total,
                      "measure": cell.measure, "methods": cell.methods, "seed": cell.seed})

    def cell_done(i, n, key):
        cell = by_key.get(_text(key))
        if cell is None:
            return
        finished["trainings"] += n_levels + (cell.seed not in finished["seeds"])
        finished["seeds"].add(cell.seed)
        report_progress(cell, 0)
        log(f"{cell.measure} {'/'.join(cell.methods)} seed {cell.seed}: done ({i}/{n})")

    def within(cell, done, n):
        report_progress(cell, done + (cell.seed not in finished["seeds"]))

    report = run_cells(cells, compute_roar_cell, store, run, backend=Backend.from_options(workers=workers, ray=ray),
                       command=command, progress=cell_done, cell_progress=within)
    written = {_text(k) for k in store_siblings(store, run, cells)}
    done, skipped = {_text(k) for k in report.done}, {_text(k) for k in report.skipped}
    for cell in cells:
        if _text(cell.key()) in done:
            report.done += [k for k in cell.keys()[1:] if _text(k) in written]
        elif _text(cell.key()) in skipped:
            report.skipped += cell.keys()[1:]
    return report


def _text(key: dict) -> str:
    return json.dumps(key, sort_keys=True, default=str)
