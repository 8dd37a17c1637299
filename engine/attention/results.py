"""Reading the attention diagnostics back (for the Attention page and the report).

Two layouts are read: runs in the results store (`<results>/attention/<run>/cells/`, written by
engine.attention.runner since the sweeps run on engine.sweeps) and runs written before, as
`<results>/attention/<run>/<dataset>_summary.json` with `_seed_variance.parquet` and `_adversaries.parquet`
(the shipped `default` run). Both give the same summary dict and tables.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from engine.results import default_results_dir

VARIANCE_COLUMNS = ["instance", "seed", "jsd", "tvd", "max_attention", "predicted", "label"]


def _root(results_dir) -> Path:
    return Path(results_dir or default_results_dir()) / "attention"


def attention_runs(results_dir: str | None = None) -> list[tuple[str, str]]:
    """(run, dataset) pairs that have a summary (old layout) or a base-model cell (store)."""
    from engine.attention.runner import BASE, attention_store

    root = _root(results_dir)
    if not root.is_dir():
        return []
    pairs = {(p.parent.name, p.name.removesuffix("_summary.json")) for p in root.glob("*/*_summary.json")}
    store = attention_store(results_dir)
    for run in store.runs():
        pairs |= {(run, entry["cell"]["dataset"]) for entry in store.provenance(run)
                  if entry.get("cell", {}).get("part") == BASE}
    return sorted(pairs)


def load_attention_results(run: str, dataset: str, results_dir: str | None = None) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """(summary, seed variance, adversaries) of one run and dataset.

    summary: {dataset, base_model, base, uniform, best_adversary, guided_mlp: {guide: metrics}, provenance};
    seed variance: one row per (test instance, other seed) with VARIANCE_COLUMNS; adversaries: one row per
    lambda (runner.adversary_table)."""
    folder = _root(results_dir) / run
    if (folder / f"{dataset}_summary.json").is_file() and not (folder / "cells").is_dir():
        summary = json.loads((folder / f"{dataset}_summary.json").read_text(encoding="utf-8"))
        variance = pd.read_parquet(folder / f"{dataset}_seed_variance.parquet")
        adversaries = pd.read_parquet(folder / f"{dataset}_adversaries.parquet")
        return summary, variance, adversaries
    return _from_store(run, dataset, results_dir)


def _from_store(run: str, dataset: str, results_dir) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    from engine.attention.runner import (
        BASE,
        GUIDED_MLP,
        GUIDES,
        SEED_VARIANCE,
        UNIFORM,
        adversary_table,
        attention_store,
        best_adversary,
    )
    from engine.errors import InvalidInputError

    store = attention_store(results_dir)
    data = store.load(run)
    data = data[data["dataset"] == dataset] if not data.empty else data
    if data.empty or not (data["measure"] == BASE).any():
        raise InvalidInputError(f"attention run {run!r} has no base-model cell for dataset {dataset!r}; runs: "
                                f"{', '.join(f'{r}/{d}' for r, d in attention_runs(results_dir)) or 'none'}")

    def metrics(part: pd.DataFrame) -> dict:
        return {r.metric: float(r.value) for r in part.itertuples()}

    base = data[data["measure"] == BASE]
    adversaries = adversary_table(data, dataset)
    best = best_adversary(adversaries) if not adversaries.empty else None
    guided = {}
    mlp = data[data["measure"] == GUIDED_MLP]
    for guide in GUIDES:
        part = mlp[mlp["guide"] == guide] if "guide" in mlp.columns else mlp.iloc[0:0]
        if guide == "adversary":
            part = part[part["lambda"] == best["lambda"]] if best is not None and "lambda" in part.columns else part.iloc[0:0]
        if not part.empty:
            guided[guide] = metrics(part)
    entries = [e for e in store.provenance(run) if e.get("cell", {}).get("dataset") == dataset]
    first = next(e for e in entries if e["cell"].get("part") == BASE)
    cells = [e["cell"] for e in entries]
    summary = {
        "dataset": dataset, "base_model": str(base["model"].iloc[0]), "base": metrics(base),
        "uniform": metrics(data[data["measure"] == UNIFORM]), "best_adversary": best, "guided_mlp": guided,
        "provenance": {**first["provenance"],
                       "seeds": 1 + len({c["seed"] for c in cells if c.get("part") == SEED_VARIANCE}),
                       "lambdas": sorted({c["lam"] for c in cells if c.get("lam") is not None and c.get("guide") is None}),
                       "seconds": round(sum(e["provenance"].get("seconds", 0.0) for e in entries), 1)},
    }
    rows = data[data["measure"] == SEED_VARIANCE]
    if rows.empty:
        variance = pd.DataFrame(columns=VARIANCE_COLUMNS)
    else:
        variance = rows.pivot_table(index=["seed", "instance", "max_attention", "predicted", "label"], columns="metric",
                                    values="value", aggfunc="first").reset_index()
        variance = variance.sort_values(["seed", "instance"], kind="stable").reset_index(drop=True)[VARIANCE_COLUMNS]
        variance.columns.name = None
        variance = variance.astype({"instance": int, "seed": int, "predicted": int, "label": int})
    return summary, variance, adversaries


def wp_table(summary: dict) -> pd.DataFrame:
    """This project's numbers in the shape of W&P Tables 2-4 (positive-class F1 when binary)."""
    key = "f1_positive" if "f1_positive" in summary["base"] else "accuracy"
    best = summary.get("best_adversary") or {}
    rows = [
        {"table": "t2", "setting": "base", "value": summary["base"][key]},
        {"table": "t2", "setting": "uniform", "value": summary["uniform"][key]},
        *({"table": "t3", "setting": f"mlp_{name}", "value": m[key]} for name, m in summary["guided_mlp"].items()),
    ]
    if best:
        rows.append({"table": "t4", "setting": "adversary", "value": best[key], "lambda": best["lambda"],
                     "tvd": best["tvd"], "jsd": best["jsd"]})
    out = pd.DataFrame(rows)
    out.insert(0, "metric", key)
    return out
