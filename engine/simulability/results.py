"""Reading simulability runs back (for the Simulability page, the CLI's summary table and the docs).

Summaries are over student seeds: median and interquartile range (25th-75th percentile), as SMaT reports.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from engine.simulability.runner import SINGLE_HEADS, simulability_store

ORDER = ("none", "grad-l2", "x-grad-sign", "ig-sign", "attention-all", "attention-last", "smat", "oracle", "random")


def simulability_runs(results_dir: str | None = None) -> list[str]:
    return simulability_store(results_dir).runs()


def load_simulability(run: str | None = None, results_dir: str | None = None) -> pd.DataFrame:
    """Every row of one run (or of all runs), with a `run` column."""
    store = simulability_store(results_dir)
    if run is not None and run not in store.runs():
        return pd.DataFrame()
    return store.load(run)


def _order(names) -> list[str]:
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def simulation_summary(data: pd.DataFrame) -> pd.DataFrame:
    """One row per (explainer, budget): median, q25, q75 of test simulation accuracy in %, and the seed count."""
    part = data[data["metric"] == "simulation accuracy"]
    if part.empty:
        return pd.DataFrame(columns=["explainer", "budget", "median", "q25", "q75", "seeds"])
    out = (part.groupby(["measure", "budget"])["value"]
           .agg(median=lambda v: 100 * np.median(v), q25=lambda v: 100 * np.percentile(v, 25),
                q75=lambda v: 100 * np.percentile(v, 75), seeds="count")
           .reset_index().rename(columns={"measure": "explainer"}))
    out["explainer"] = pd.Categorical(out["explainer"], _order(out["explainer"].unique()), ordered=True)
    return out.sort_values(["explainer", "budget"]).reset_index(drop=True)


def simulation_table(data: pd.DataFrame) -> pd.DataFrame:
    """SMaT Table 1's shape: explainers x budgets, cells "median [q25:q75]" (simulation accuracy %)."""
    summary = simulation_summary(data)
    if summary.empty:
        return pd.DataFrame()
    summary["cell"] = [f"{m:.1f} [{a:.1f}:{b:.1f}] (n={int(n)})"
                       for m, a, b, n in summary[["median", "q25", "q75", "seeds"]].itertuples(index=False)]
    table = summary.pivot(index="explainer", columns="budget", values="cell")
    table.columns = [f"{b:,}" for b in table.columns]
    return table


def published_table() -> tuple[pd.DataFrame, str]:
    """SMaT's Table 1 (IMDB, ELECTRA-small) in the same shape, and its citation."""
    from engine.results.published import load_published

    table, citation = load_published("smat_table1")
    table["cell"] = [f"{m:.1f} [{a:.1f}:{b:.1f}]" for m, a, b in table[["median", "q25", "q75"]].itertuples(index=False)]
    pivot = table.pivot(index="explainer", columns="budget", values="cell")
    pivot = pivot.loc[_order(pivot.index)]
    pivot.columns = [f"{b:,}" for b in pivot.columns]
    return pivot, citation


def head_weight_history(data: pd.DataFrame, budget: int, seed: int) -> tuple[list[int], np.ndarray]:
    """SMaT's lambda snapshots of one cell: (steps, weights [snapshots, layers, heads])."""
    part = data[(data["metric"] == "head weight") & (data["measure"] == "smat") & (data["budget"] == budget)
                & (data["seed"] == seed)]
    if part.empty:
        return [], np.zeros((0, 0, 0))
    layers, heads = int(part["layer"].max()) + 1, int(part["head"].max()) + 1
    steps = sorted(part["step"].unique())
    grid = np.zeros((len(steps), layers, heads))
    for i, step in enumerate(steps):
        rows = part[part["step"] == step]
        grid[i, rows["layer"].to_numpy(int), rows["head"].to_numpy(int)] = rows["value"].to_numpy()
    return [int(s) for s in steps], grid


def plausibility_table(data: pd.DataFrame) -> pd.DataFrame:
    """Sentence-level AUC against the supporting facts per explainer (mean over the cells that measured it;
    static explainers give the same value in every cell, SMaT one per learned lambda), plus the best single
    head (found with the gold labels: an upper bound, not an explainer)."""
    part = data[(data["metric"] == "sentence AUC") & (data["measure"] != SINGLE_HEADS)]
    rows = []
    for name in _order(part["measure"].unique()):
        values = part[part["measure"] == name]["value"]
        rows.append({"explainer": name, "sentence AUC": float(values.mean()), "cells": int(len(values)),
                     "min": float(values.min()), "max": float(values.max())})
    heads = single_head_auc(data)
    if not heads.empty:
        best = heads.loc[heads["sentence AUC"].idxmax()]
        rows.append({"explainer": f"best single head (L{int(best['layer'])} H{int(best['head'])}, chosen with the labels)",
                     "sentence AUC": float(best["sentence AUC"]), "cells": 1, "min": float(best["sentence AUC"]),
                     "max": float(best["sentence AUC"])})
    return pd.DataFrame(rows)


def single_head_auc(data: pd.DataFrame) -> pd.DataFrame:
    """Each head's own sentence AUC: columns layer, head, sentence AUC."""
    part = data[(data["metric"] == "sentence AUC") & (data["measure"] == SINGLE_HEADS)]
    return part[["layer", "head", "value"]].rename(columns={"value": "sentence AUC"}).reset_index(drop=True)


def head_auc_vs_weight(data: pd.DataFrame) -> pd.DataFrame:
    """Per head: its sentence AUC and its learned SMaT weight (mean over the SMaT cells), for the scatter."""
    heads = single_head_auc(data)
    learned = data[(data["metric"] == "learned head weight") & (data["measure"] == "smat")]
    if heads.empty or learned.empty:
        return pd.DataFrame(columns=["layer", "head", "sentence AUC", "weight"])
    weights = learned.groupby(["layer", "head"])["value"].mean().rename("weight").reset_index()
    return heads.merge(weights, on=["layer", "head"], how="left")
