"""Which measures the stored results rank most faithful for a checkpoint: what a page offers first, so that a
newcomer's first run shows a measure that beats random masking rather than one whose curve sits on it.

The ranking is RACU (higher: more faithful) from the results store's recursive-masking cells of the checkpoint
itself, or, where it has none, of its family: checkpoints of the same base model, dataset and fine-tuning strategy
(other seeds of the same recipe); a run holding the checkpoint ranks over all its seeds. Of the runs found, the one over the most inputs x seeds decides (a beam subset of
a few inputs never outranks the whole split).
"""
from __future__ import annotations

import pandas as pd

from engine.faithfulness.summary import area_metrics_per_seed
from engine.results.store import RECURSIVE_MASKING, ResultsStore, cell_key

BASELINE = "random"


def _rows_for(results: pd.DataFrame, model_id: str, base_model: str | None, dataset: str | None,
              strategy: str | None) -> pd.DataFrame:
    """The recursive-masking ratio rows that rank measures for the checkpoint: the runs holding its own cells, with
    their other seeds of the same recipe (a run's ranking is over all its seeds); else its family's rows in any run
    (same base model, dataset and strategy)."""
    if results.empty or "model" not in results.columns:
        return results.iloc[0:0]
    rows = results[(results["method"] == RECURSIVE_MASKING) & (results["schedule"] == "ratio")]
    own = rows[rows["model"] == model_id]
    if not own.empty:  # the recipe as the cells recorded it
        base_model, dataset, strategy = (own[c].iloc[0] for c in ("base_model", "dataset", "strategy"))
        rows = rows[rows["run"].isin(set(own["run"]))]
    elif base_model is None or dataset is None:
        return own
    family = rows[(rows["base_model"] == base_model) & (rows["dataset"] == dataset)]
    return family if strategy is None else family[family["strategy"] == strategy]


def ranked_measures(results: pd.DataFrame, model_id: str, base_model: str | None = None, dataset: str | None = None,
                    strategy: str | None = None) -> list[str]:
    """Measures ordered by RACU %, most faithful first (the `random` baseline left out); [] without stored results.

    results: the results store's tidy rows (`ResultsStore().load()`), any runs.
    model_id: the checkpoint's id; base_model, dataset, strategy: its metadata, for the family fallback.
    """
    rows = _rows_for(results, model_id, base_model, dataset, strategy)
    if rows.empty:
        return []
    # The one set of curves over the most inputs x seeds (then the most measures): a run's group as the report reads it.
    sizes = rows.groupby(["run", "n_examples"], dropna=False).agg(seeds=("seed", "nunique"),
                                                                  measures=("measure", "nunique"))
    sizes = sizes.assign(weight=[(0 if pd.isna(n) else n) * s for (_, n), s in zip(sizes.index, sizes["seeds"])])
    for (run, n_examples), _ in sizes.sort_values(["weight", "measures"], ascending=False).iterrows():
        part = rows[(rows["run"] == run) & ((rows["n_examples"] == n_examples) if pd.notna(n_examples)
                                            else rows["n_examples"].isna())]
        if part["model"].nunique() > 1 and (part.groupby("seed")["model"].nunique() > 1).any():
            part = part[part["model"] == sorted(part["model"].unique())[0]]  # one checkpoint per seed
        per_seed = area_metrics_per_seed(part, baseline=BASELINE)  # the mean over seeds is what ranks; no CIs needed
        if per_seed.empty:
            continue  # no random baseline in this set: try the next
        racu = per_seed[per_seed["measure"] != BASELINE].groupby("measure")["racu"].mean().dropna()
        if not racu.empty:
            return list(racu.sort_values(ascending=False, kind="stable").index)
    return []


def _cells_named(store: ResultsStore, run: str, pattern: str) -> bool:
    return any((store.root / run / "cells").glob(pattern))


def stored_rows_for(store: ResultsStore, model_id: str, dataset: str | None) -> pd.DataFrame:
    """The rows `ranked_measures` may need, read from only the runs that can hold them: those with a cell of the
    checkpoint, else those with a cell on its dataset (a cell's file name starts with its model and dataset; see
    `cell_key`), since reading the whole shipped store takes seconds; a model without stored cells reads none."""
    prefix = cell_key({"model": model_id}).rsplit("_", 1)[0]
    runs = [run for run in store.runs() if _cells_named(store, run, f"{prefix}_*.json")]
    if not runs and dataset is not None:
        on_dataset = cell_key({"dataset": dataset}).rsplit("_", 1)[0]
        runs = [run for run in store.runs() if _cells_named(store, run, f"*_{on_dataset}_*.json")]
    frames = [store.load(run) for run in runs]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def first_measure(offered: list[str], ranked: list[str], fallback: str = "loo-sign") -> str | None:
    """The measure a page opens on: the best-ranked one it offers, else `fallback` (leave-one-out with the sign kept:
    the most faithful measure of most shipped runs, at N + 1 forward passes), else the first offered."""
    for measure in ranked:
        if measure in offered:
            return measure
    if fallback in offered:
        return fallback
    return offered[0] if offered else None
