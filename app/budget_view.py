"""The Benchmarks page's Pareto view: faithfulness (RACU, NAOPC) against the forward passes each search spent, one
point per fixed-cost method (LOO, greedy LOO, each beam width), one curve for the anytime search over its budgets,
and the Pareto front (no other point is both cheaper and more faithful). Data: runs of scripts/experiments/budget_pareto.py,
summarised by engine.results.budget_pareto."""
from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.column_labels import label
from engine.results.budget_pareto import BEAM_CURVE, METRICS, POINTS, pareto_front

AXIS = {"racu": "RACU % (higher: more faithful)", "naopc": "NAOPC (1 = the best attainable AOPC)",
        "aopc": "AOPC of p_gold (full curve)"}
COLOURS = {"loo": "#7f7f7f", "greedy-loo": "#1f77b4", "beam-2": "#2ca02c", "beam-5": "#17becf", "beam-10": "#9467bd",
           "beam-20": "#8c564b", "anytime": "#d62728"}


def budget_runs(root: str | Path) -> list[str]:
    """Names of the folders under the results root that hold a budget run (a points.csv), sorted."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / POINTS).is_file())


def _error_y(part: pd.DataFrame, metric: str) -> dict | None:
    low, high = f"{metric}_low", f"{metric}_high"
    if low not in part or not np.isfinite(part[low]).any():
        return None
    return {"type": "data", "symmetric": False, "array": (part[high] - part[metric]).to_numpy(),
            "arrayminus": (part[metric] - part[low]).to_numpy(), "thickness": 1}


def pareto_figure(summary: pd.DataFrame, metric: str = "racu") -> go.Figure:
    """Faithfulness `metric` (racu | naopc | aopc) against mean forward passes per input (log axis): a trace per
    method (the anytime search as one line over its budgets, the others one point each, all with 95% CI bars
    where the summary has them), beam's cost curve dotted through LOO, greedy and the beams, and the Pareto front
    as a grey step line through its points."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    fig = go.Figure()
    beams = summary[summary["method"].isin(BEAM_CURVE)].sort_values("forwards")
    if len(beams) > 1:
        fig.add_trace(go.Scatter(x=beams["forwards"], y=beams[metric], mode="lines", name="beam's curve",
                                 line={"dash": "dot", "color": "#bbbbbb"}, hoverinfo="skip"))
    front = summary[pareto_front(summary, metric)].sort_values("forwards")
    if len(front):
        fig.add_trace(go.Scatter(x=front["forwards"], y=front[metric], mode="lines", name="Pareto front",
                                 line={"shape": "hv", "color": "#444444", "width": 2}))
    for method, part in summary.groupby("method", sort=False):
        part = part.sort_values("forwards")
        many = len(part) > 1
        safe = html.escape(str(method))  # a name read from a CSV: plotly would render <a>, <b> in it
        text = [f"{m:g} x G" if m else safe for m in part["multiple"]]
        fig.add_trace(go.Scatter(
            x=part["forwards"], y=part[metric], name=safe, mode="lines+markers" if many else "markers",
            marker={"size": 9, "color": COLOURS.get(method)}, line={"color": COLOURS.get(method)},
            error_y=_error_y(part, metric), text=text,
            hovertemplate="%{text}<br>%{x:.0f} passes per input<br>%{y:.4g}<extra>" + safe + "</extra>"))
    fig.update_layout(xaxis_title="forward passes per input (mean, log scale)", yaxis_title=AXIS[metric],
                      xaxis_type="log", height=480, legend_title_text="method")
    return fig


def summary_for_display(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary with the front flags per metric and the readable column names of app.column_labels, for a table
    beside the plot."""
    out = summary.assign(front_racu=pareto_front(summary, "racu"), front_naopc=pareto_front(summary, "naopc"))
    out = out.round({"forwards": 1, "forwards_per_g": 2, "aopc": 4, "naopc": 4, "naopc_low": 4, "naopc_high": 4,
                     "racu": 1, "racu_low": 1, "racu_high": 1, "complete": 2})
    return out.rename(columns={c: label(c) for c in out.columns})
