"""ROAR / Recursive ROAR sweeps into the results store (the retraining counterpart of benchmark.py).

A cell is (base model config, dataset, measure, seed, method) with method `roar` or `recursive-roar`;
its curve is the test metric of the model retrained at each masking level (engine.faithfulness.roar).
The level-0 model of each seed is trained once, saved in models_cache and shared by every measure and
method of that seed, as in R-ROAR. Rows are tidy like the recursive-masking cells, with a `method`
column and the measured `masked_fraction` of test tokens; there is no MaSF p-value (the retrained
model sees masked data in training, so in-distribution is by construction), so `p_value` is NaN.

The `random` baseline is model-independent: ROAR's fixed random ranking and Recursive ROAR's
re-drawn one both mask a uniformly random nested set of tokens, so one random curve per seed is
computed (recursively) and stored under every requested method, marked so in its provenance.
Cells already in the store are skipped: an interrupted sweep resumes.
"""
from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import pandas as pd

from engine.errors import InvalidInputError
from engine.results.store import schedule_columns
from engine.runtime import code_version, runtime_record

METHODS = ("recursive-roar", "roar")


def _cell(config, measure: str, seed: int, method: str, strategy: str, levels: Sequence[float]) -> dict:
    return {"model": _base_id(config, seed), "dataset": config.dataset, "measure": measure, "seed": seed,
            "method": method, "strategy": strategy, "levels": [float(x) for x in levels],
            "retraining": {"epochs": config.epochs, "lr": config.lr, "batch_size": config.batch_size,
                           "train_limit": config.train_limit, "eval_limit": config.eval_limit}}


def _base_id(config, seed: int) -> str:
    from engine.models import default_model_id

    return default_model_id(replace(config, seed=seed))


def _weights_sha256(folder):
    from engine.models.checkpoint import weights_sha256

    return weights_sha256(folder)


def _base_classifier(config, log: Callable[[str], None]):
    """The level-0 model of this config: loaded from models_cache when one with the same training
    config exists, else trained and saved (so later sweeps and the other pages reuse it)."""
    from engine.models.reuse import load_or_train

    return load_or_train(config, _base_id(config, config.seed), log=lambda m: log(f"level-0 model {m}"),
                         other_config_suffix="-roar")


def run_retraining_sweep(config, measures: Sequence[str], seeds: Sequence[int], methods: Sequence[str] = METHODS,
                         strategy: str = "quantile", levels: Sequence[float] | None = None, run: str = "roar",
                         results_dir: str | None = None, log: Callable[[str], None] = print,
                         progress: Callable[[dict], None] | None = None, command: str | None = None) -> dict:
    """Every (seed, measure, method) curve not yet in the store. Returns {'done', 'skipped'} cell lists.

    config: the TrainConfig of the level-0 model and of every retraining (its seed is replaced per seed).
    progress: called after every retraining with {'trainings_done', 'trainings_total', 'cell', 'level', 'value'}."""
    from engine.data import get_dataset
    from engine.faithfulness.roar import DEFAULT_COUNTS, DEFAULT_QUANTILES, roar_curve
    from engine.importance import MEASURES
    from engine.results import ResultsStore

    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise InvalidInputError(f"unknown method(s) {unknown}; use {', '.join(METHODS)}")
    missing = [m for m in measures if m not in MEASURES]
    if missing:
        raise InvalidInputError(f"unknown measure(s) {', '.join(missing)}; known: {', '.join(sorted(MEASURES))}")
    if strategy not in ("quantile", "count"):
        raise InvalidInputError(f"unknown strategy {strategy!r}; use quantile or count")
    get_dataset(config.dataset, config.split_seed)  # an unknown dataset fails here, before any training
    levels = list(levels or (DEFAULT_QUANTILES if strategy == "quantile" else DEFAULT_COUNTS))
    if strategy == "quantile" and not all(0 < x < 1 for x in levels):
        raise InvalidInputError(f"quantile levels must lie strictly between 0 and 1, got {levels}")
    store = ResultsStore(results_dir)
    # What is left: random once per seed (its curve serves every method), the others per method.
    todo: list[tuple[int, str, tuple[str, ...]]] = []
    skipped = []
    for seed in seeds:
        for measure in measures:
            # random: one computation whose curve is stored under every method; others: one per method.
            groups = [tuple(methods)] if measure == "random" else [(method,) for method in methods]
            for group in groups:
                cells = [_cell(config, measure, seed, method, strategy, levels) for method in group]
                if all(store.has_cell(run, c) for c in cells):
                    skipped += cells
                else:
                    todo.append((seed, measure, group))
    total = len(todo) * len(levels) + len({seed for seed, _, _ in todo})
    done_trainings, done = 0, []
    bases: dict[int, object] = {}
    for seed, measure, for_methods in todo:
        seed_config = replace(config, seed=seed)
        if seed not in bases:
            bases[seed] = _base_classifier(seed_config, log)
            done_trainings += 1
        recursive = for_methods[0] == "recursive-roar" or measure == "random"
        started = time.time()

        def step(info, _measure=measure, _methods=for_methods):
            nonlocal done_trainings
            done_trainings += 1
            if progress is not None:
                progress({"trainings_done": done_trainings, "trainings_total": total, "measure": _measure,
                          "methods": _methods, "seed": seed, "level": info["level"], "value": info["value"]})

        curve = roar_curve(seed_config, measure, recursive=recursive, strategy=strategy, levels=levels,
                           base_classifier=bases[seed], progress=step)
        base = bases[seed]
        for method in for_methods:
            cell = _cell(config, measure, seed, method, strategy, levels)
            tidy = pd.DataFrame([{
                "model": base.metadata.get("id", cell["model"]), "seed": seed, "dataset": config.dataset, "split": "test",
                "measure": measure,
                "strategy": base.metadata.get("strategy"), "method": method, "step": i,
                **schedule_columns(strategy, level, curve["levels"][-1]),
                "metric": base.metadata.get("metric"), "value": value,
                "p_value": math.nan, "p_below_005": math.nan, "masked_fraction": fraction,
                "base_model": base.metadata.get("base_model"),
            } for i, (level, value, fraction) in enumerate(zip(curve["levels"], curve["values"], curve["masked_fraction"]))])
            provenance = {
                "command": command or "engine.faithfulness.retraining.run_retraining_sweep",
                "code_version": code_version(), "level0_checkpoint": base.metadata.get("id", cell["model"]),
                "level0_checkpoint_sha256": _weights_sha256(base.folder),
                "method": method, "computed_as": "recursive-roar" if recursive else "roar",
                "note": ("random is model-independent: one recursively drawn random curve serves every method"
                         if measure == "random" else ""),
                "target": "gold label", "strategy": strategy, "levels": levels,
                "retrained_test_metrics": [m.get("test") for m in curve["models"]],
                "seconds": round(time.time() - started, 1),
                "machine": f"{platform.machine()} {os.cpu_count()} cpus, {base.device}",
                "runtime": runtime_record(base.device),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            store.write_cell(run, cell, tidy, provenance)
            done.append(cell)
            log(f"{measure} {method} seed {seed}: " + " ".join(f"{v:.3f}" for v in curve["values"]))
    return {"done": done, "skipped": skipped}

