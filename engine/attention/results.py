"""Reading the attention diagnostics back (for the Attention page and the README)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from engine.results import default_results_dir


def attention_runs(results_dir: str | None = None) -> list[tuple[str, str]]:
    """(run, dataset) pairs that have a summary."""
    root = Path(results_dir or default_results_dir()) / "attention"
    if not root.is_dir():
        return []
    return sorted((p.parent.name, p.name.removesuffix("_summary.json")) for p in root.glob("*/*_summary.json"))


def load_attention_results(run: str, dataset: str, results_dir: str | None = None) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    folder = Path(results_dir or default_results_dir()) / "attention" / run
    summary = json.loads((folder / f"{dataset}_summary.json").read_text(encoding="utf-8"))
    variance = pd.read_parquet(folder / f"{dataset}_seed_variance.parquet")
    adversaries = pd.read_parquet(folder / f"{dataset}_adversaries.parquet")
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
