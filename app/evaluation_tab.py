"""The Benchmarks page's evaluation section: the standard erasure metrics per measure, each beside its MaSF share,
masked and plain models side by side; sanity checks; faithfulness against cost with the Pareto front.

Reads `<results>/evaluation` (engine.faithfulness.evaluation) and, for the cost plot, the recursive-masking
results store; a cell without a recorded cost is left out of the cost plot (never given a made-up cost).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.column_labels import column_config, metric_help, metric_label
from app.figure_export import chart
from app.figure_export import table as table_view
from app.follow_sidebar import follow, other_model_note, sidebar_model
from app.results_cache import area_table_of, evaluation_table_of, state_of, store_rows
from app.text import md
from engine.csv_safe import frame_to_csv
from engine.faithfulness.evaluation import (
    AGREEMENT,
    ERASURE,
    SANITY_CHECKS,
    evaluation_store,
)
from engine.faithfulness.registry import aggregates


def pareto_front(cost: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats (cheaper or as cheap and more faithful), by increasing cost."""
    order = np.lexsort((-value, cost))
    front, best = [], -np.inf
    for i in order:
        if value[i] > best:
            front.append(i)
            best = value[i]
    return np.asarray(front, dtype=int)


def _erasure_section(table: pd.DataFrame) -> None:
    """`table`: evaluation_table of the chosen run's erasure rows."""
    if table.empty:
        return
    c1, c2 = st.columns(2)
    datasets = sorted(table["dataset"].unique())
    meta = sidebar_model() or {}
    follow("eval_dataset", datasets, [meta.get("dataset")])  # the sidebar's model's, and again when it changes
    dataset = c1.selectbox("Dataset", datasets, key="eval_dataset")
    table = table[table["dataset"] == dataset]
    models = sorted(table["base_model"].dropna().unique())
    follow("eval_model", models)
    model = c2.selectbox("Model", models, key="eval_model")  # the sidebar's first
    other_model_note(str(model), "this evaluation run has no rows of it on this dataset.")
    table = table[table["base_model"] == model]
    removals = sorted(table["removal"].unique())
    if len(removals) > 1:
        table = table[table["removal"] == st.radio("Removal", removals, horizontal=True, key="eval_removal",
                                                   help="mask: replaced by [MASK]; delete: dropped (ERASER)")]
    metric = st.selectbox("Metric", [m for m in aggregates() if m in set(table["metric"])],
                          format_func=metric_label, key="eval_metric")
    st.caption(metric_help(metric) + ". Mean over seeds [95% BCa CI]; beside it the share of its perturbed inputs "
               "that MaSF calls out of distribution (p < 0.05). A value resting mostly on out-of-distribution inputs "
               "measures the model's reaction to unfamiliar inputs as much as the explanation.")
    part = table[(table["metric"] == metric) & table["level"].isna()]
    cells = {}
    for strategy, group in part.groupby("strategy"):
        for _, r in group.iterrows():
            ci = "" if np.isnan(r["ci_low"]) else f" [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
            cells.setdefault(r["measure"], {})[f"{strategy}: {metric} ({r['better']} better)"] = f"{r['value']:.3f}{ci}"
            cells[r["measure"]][f"{strategy}: MaSF p<0.05"] = f"{r['p_below_005']:.0%}"
    table_view(pd.DataFrame.from_dict(cells, orient="index").rename_axis("measure").reset_index(),
          f"evaluation-{dataset}-{model}-{metric}", key="eval_metric_table", hide_index=True)
    per_level = table[(table["metric"] == metric.removeprefix("aopc-")) & table["level"].notna()]
    if not per_level.empty:
        fig = go.Figure()
        for (strategy, measure), g in per_level.groupby(["strategy", "measure"]):
            g = g.sort_values("level")
            fig.add_trace(go.Scatter(x=g["level"], y=g["value"], mode="lines+markers", name=f"{measure} ({strategy})",
                                     line_dash="solid" if strategy == "masked" else "dot",
                                     customdata=g["p_below_005"], hovertemplate="%{y:.3f}, MaSF share %{customdata:.0%}"))
        fig.update_layout(xaxis_title="k or r (fraction of tokens)", yaxis_title=metric.removeprefix("aopc-"), height=380,
                          xaxis_tickformat=".0%")
        chart(fig, f"evaluation-{dataset}-{model}-{metric}", key="eval_metric_chart")
    st.download_button("Download the evaluation table (CSV)", frame_to_csv(table).encode(),
                       file_name=f"evaluation-{dataset}-{model}.csv", mime="text/csv")


def _sanity_section(data: pd.DataFrame) -> None:
    sanity = data[data["method"].isin(SANITY_CHECKS.values())]
    if sanity.empty:
        return
    st.subheader("Sanity checks (Adebayo et al. 2018)")
    st.caption("Mean Spearman between each measure's scores on the trained model and on the randomised one; pass "
               "(our rule): the upper end of the 95% CI after full randomisation below 0.5.")
    for method, part in sanity.groupby("method"):
        fig = go.Figure()
        for (model, strategy, measure), g in part.groupby(["base_model", "strategy", "measure"]):
            g = g.groupby(["step", "stage"], as_index=False)["value"].mean().sort_values("step")
            fig.add_trace(go.Scatter(x=g["stage"], y=g["value"], mode="lines+markers", name=f"{measure} ({model} {strategy})",
                                     line_dash="solid" if strategy == "masked" else "dot"))
        fig.update_layout(title=method, yaxis_title="Spearman with the trained model", height=360)
        chart(fig, f"sanity-{method}", key=f"eval_sanity_{method}")
        final = part[part["passes"].notna()] if "passes" in part else part.iloc[0:0]
        if not final.empty:
            shown = final[["base_model", "strategy", "measure", "seed", "value", "ci_low", "ci_high", "passes"]]
            table_view(shown, f"sanity-{method}", key=f"eval_sanity_table_{method}", hide_index=True,
                  column_config=column_config(shown, {
                "value": ("Spearman after full randomisation", "with the trained model's scores (lower: passes)")}))


def _agreement_section(data: pd.DataFrame) -> None:
    part = data[data["method"] == AGREEMENT]
    if part.empty:
        return
    st.subheader("Agreement between measures (Krishna et al. 2022)")
    st.caption("Mean over inputs (and seeds) for each pair of measures: feature, rank, sign and signed-rank agreement "
               "among the top 20% of tokens by magnitude; Spearman and pairwise rank agreement over all tokens. "
               "1 = the two measures agree fully.")
    for strategy, g in part.groupby("strategy"):
        wide = g.pivot_table(index=["measure_a", "measure_b"], columns="metric", values="value").reset_index()
        st.markdown(f"**{md(strategy)}** ({md(g['base_model'].iloc[0])}, {int(g['n_examples'].iloc[0])} inputs per seed)")
        table_view(wide.round(3), f"agreement-{strategy}", key=f"eval_agreement_{strategy}", hide_index=True,
              column_config=column_config(wide))


def _cost_section() -> None:
    from engine import ResultsStore

    store = ResultsStore()
    state = state_of(store)
    data = store_rows(str(store.root), state)
    if "seconds_per_explanation" not in data.columns or data["seconds_per_explanation"].isna().all():
        st.caption("No recursive-masking cell records its cost yet (cells written before costs were recorded are "
                   "shown without one, never with a made-up one).")
        return
    st.subheader("Faithfulness against cost per explanation")
    costed = data.dropna(subset=["seconds_per_explanation"])
    run = st.selectbox("Run", sorted(costed["run"].unique()), key="eval_cost_run")
    areas = area_table_of(str(store.root), state, run)
    cost = costed[costed["run"] == run].groupby("measure")["seconds_per_explanation"].mean()
    areas = areas[areas["measure"].isin(cost.index)].assign(cost=lambda d: d["measure"].map(cost))
    if areas.empty:
        return
    x, y = areas["cost"].to_numpy(float), areas["racu_pct"].to_numpy(float)
    fig = go.Figure(go.Scatter(x=x, y=y, mode="markers+text", text=areas["measure"], textposition="top center",
                               error_y={"type": "data", "symmetric": False,
                                        "array": areas["racu_high"] - areas["racu_pct"],
                                        "arrayminus": areas["racu_pct"] - areas["racu_low"]}, name="measures"))
    front = pareto_front(x, y)
    fig.add_trace(go.Scatter(x=x[front], y=y[front], mode="lines", name="Pareto front", line_dash="dash"))
    fig.update_layout(xaxis_type="log", xaxis_title="seconds per explanation (log)", yaxis_title="RACU (%)", height=420)
    chart(fig, f"cost-{run}", key="eval_cost_chart")


def render_evaluation_tab() -> None:
    """The whole section (called by pages/benchmarks.py)."""
    store = evaluation_store()
    state = state_of(store)
    data = store_rows(str(store.root), state)
    if data.empty:
        st.info("No evaluation results yet: `python -m engine metrics --help` (docs/evaluation.md).")
    else:
        runs = sorted(data["run"].unique())
        follow("eval_run", runs)
        run = st.selectbox("Evaluation run", runs, key="eval_run")  # tiny-rt-... for tiny
        data = data[data["run"] == run]
        if (data["method"] == ERASURE).any():
            _erasure_section(evaluation_table_of(str(store.root), state, run))
        _agreement_section(data)
        _sanity_section(data)
    _cost_section()
