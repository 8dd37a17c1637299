"""Benchmarks: browse the results store. It opens on a summary (app/benchmark_summary.py: the chosen run's ranking
with the published numbers beside ours, each measure one link from Explain); the other parts (curves, MaSF, ROAR,
plausibility, budget, own explanations, the evaluation suite) are chosen one at a time, and only the chosen one is
computed."""
from __future__ import annotations

import html
from types import SimpleNamespace

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import palette
from app.benchmark_summary import METHOD_TITLE, PART_KEY, PARTS, URL_APPLIED, View, render_summary, select_view
from app.compute_cells import compute_cells_form
from app.figure_export import chart
from app.follow_sidebar import sidebar_model
from app.shared import MODEL_KEY, get_classifier, note_if_not_masked_fine_tuned
from engine import CheckpointMeta
from engine.importance import measure_label
from engine.results import ResultsStore
from engine.results.store import is_count_schedule


def md_plotly(text: str) -> str:
    """Store text (model names) as plotly shows it: escaped, since plotly reads <b>, <a>, <br> in labels."""
    return html.escape(str(text))


@st.cache_data(show_spinner=False, max_entries=16)
def _bands(data: pd.DataFrame) -> pd.DataFrame:
    """engine.faithfulness.summary.curve_bands (a bootstrap band per measure and level) once per view's rows."""
    from engine.faithfulness.summary import curve_bands

    return curve_bands(data)


def curves_part(view: View) -> None:
    """The view's curves: each measure's mean over seeds with its 95% band, every seed faint, random grey."""
    data, k_max = view.data, view.k_max
    st.subheader(f"{METHOD_TITLE.get(view.method, view.method)} curves")
    if view.retrained:
        st.caption("Each point is a model retrained on train/validation/test data with the measure's top tokens masked "
                   "(R-ROAR); the x-axis is " + ("the number of tokens masked per input (k)." if view.counted
                                                 else "the share of each input's tokens masked."))
    bands = _bands(data)
    fig = go.Figure()
    colours = palette.measure_colours(sorted(bands["measure"].unique()))
    for measure, band in bands.groupby("measure"):
        color = colours[measure]
        x = list(band["ratio"] * k_max)
        # the random baseline's band is grey like its line (app/palette.py): a baseline, not one measure among others
        fig.add_trace(go.Scatter(x=x + x[::-1],
                                 y=list(band["high"]) + list(band["low"])[::-1], fill="toself", line={"width": 0},
                                 fillcolor=palette.band(color, 0.25 if measure == palette.RANDOM else 0.15),
                                 hoverinfo="skip", showlegend=False, legendgroup=measure))
        fig.add_trace(go.Scatter(x=band["ratio"] * k_max, y=band["mean"], name=f"{measure_label(measure)} ({measure})",
                                 line=palette.line_style(measure, color), legendgroup=measure))
        for seed, curve in data[data["measure"] == measure].groupby("seed"):
            fig.add_trace(go.Scatter(x=curve["ratio"] * k_max, y=curve["value"], line={"color": color, "width": 1},
                                     opacity=0.4, showlegend=False, legendgroup=measure, name=f"{measure} seed {seed}"))
    metric = data["metric"].iloc[0] if not data.empty else "metric"
    fig.update_layout(title=f"{METHOD_TITLE.get(view.method, view.method)}: {view.model} on {view.dataset}",
                      xaxis_title=view.x_title + (", then retrained" if view.retrained else ""),
                      yaxis_title=f"{view.split} {metric} (lower sooner: more faithful)", height=480,
                      xaxis_tickformat=view.x_format)
    chart(fig, f"curves-{view.run}-{view.dataset}-{view.model}", key="bench_curves")


def masf_part(view: View) -> None:
    """Per measure and level, the share of masked inputs MaSF finds out of distribution (p < 0.05)."""
    data, k_max = view.data, view.k_max
    if "p_below_005" not in data.columns or not data["p_below_005"].notna().any():
        st.info("This view has no MaSF p-values: retrained curves (ROAR, R-ROAR) are measured on models trained on "
                "masked data, not on masked inputs of one model." if view.retrained else
                "This view's cells were computed without MaSF p-values.")
        return
    st.subheader("MaSF: are the masked inputs still in distribution?")
    pfig = go.Figure()
    colours = palette.measure_colours(sorted(data["measure"].unique()))
    for measure, part in data.groupby("measure"):
        mean = part.groupby("ratio")["p_below_005"].mean()
        pfig.add_trace(go.Scatter(x=mean.index * k_max, y=mean.values, name=measure, mode="lines+markers",
                                  line=palette.line_style(measure, colours[measure], width=2)))
    # the 5% line is named in the legend: a label on the line sat on the curves, which run along it
    x_ends = [float(data["ratio"].min() * k_max), float(data["ratio"].max() * k_max)]
    pfig.add_trace(go.Scatter(x=x_ends, y=[0.05, 0.05], mode="lines", name="5% expected under the null",
                              line={"dash": "dash", "color": "black", "width": 1}, hoverinfo="skip"))
    pfig.update_layout(title="Masked inputs MaSF finds out of distribution", xaxis_title=view.x_title,
                       yaxis_title="share of inputs with p < 0.05 (lower: more in distribution)",
                       xaxis_tickformat=view.x_format, yaxis_tickformat=".0%", height=380)
    chart(pfig, f"masf-{view.run}-{view.dataset}-{view.model}", key="bench_masf")


def roar_part(store: ResultsStore, view: View) -> None:
    """One measure's mean curve per method (and model) of the view's dataset over every run, each beside its random
    baseline: the only part that reads the other runs."""
    from app.results_cache import rows_of

    everything = rows_of(store)
    # Only fraction schedules (ratio, quantile) share the x-axis; count curves stay in their own view above.
    part = everything[(everything["dataset"] == view.dataset) & ~everything["schedule"].map(is_count_schedule)]
    if part["method"].nunique() < 2:
        st.info(f"No run retrains models (ROAR, recursive ROAR) on {view.dataset}: nothing to compare recursive "
                "masking with here.")
        return
    st.subheader("ROAR vs Recursive ROAR vs recursive masking")
    st.caption("The same measure under each method found for this dataset (every run); dotted: the random baseline "
               "of the same method and model. Mean over seeds.")
    measures = sorted(set(part["measure"]) - {"random"})
    by_method = part.groupby("measure")["method"].nunique()
    default = max(measures, key=lambda m: (by_method.get(m, 0), m)) if measures else None
    measure = st.selectbox("Measure to compare", measures, index=measures.index(default) if default else 0,
                           key="bench_compare_measure")
    fig = go.Figure()
    # Curves over different examples (a beam subset, the whole split) are kept apart, never averaged together. One
    # legend entry per curve group (its title: method, model, examples), and the legend below the plot: a legend
    # of long names beside it took half the width and was cut off.
    groups = 0
    grouped = list(part.groupby(["method", "base_model", "strategy", "split", "n_examples", "grid"], dropna=False))
    colours = palette.series_colours(len(grouped))
    for i, ((method, model, strategy, _split, n_examples, _grid), group) in enumerate(grouped):
        if not (group["measure"] == measure).any():
            continue  # a random curve alone (e.g. a beam subset without this measure) compares nothing
        examples = f" · {int(n_examples)} examples" if pd.notna(n_examples) else ""
        color = colours[i]
        title = f"{METHOD_TITLE.get(method, method)} · {model} ({strategy}){examples}"
        groups += 1
        for name, dash in ((measure, "solid"), ("random", "dot")):
            curve = group[group["measure"] == name].groupby("ratio")["value"].mean()
            if curve.empty:
                continue
            fig.add_trace(go.Scatter(x=curve.index, y=curve.values, mode="lines+markers", line={"color": color, "dash": dash},
                                     name=name, legendgroup=title, legendgrouptitle_text=md_plotly(title)))
    fig.update_layout(title=f"{measure} under each method on {view.dataset}", xaxis_title="fraction of tokens masked",
                      yaxis_title="test metric (lower sooner: more faithful)", xaxis_tickformat=".0%",
                      height=420 + 60 * groups, legend={"orientation": "h", "yanchor": "top", "y": -0.18,
                                                          "xanchor": "left", "x": 0})
    chart(fig, f"methods-{view.dataset}-{measure}", key="bench_methods")


st.title("Benchmarks")
_model_id = st.session_state.get(MODEL_KEY)
# the model is loaded only where a part needs it (the compute form, your own explanations): its catalogue entry says
# whether it was masked-fine-tuned, and loading it (a second or more) would double the page's opening time
_meta = sidebar_model()
if _meta is not None and "base_model" in _meta:
    note_if_not_masked_fine_tuned(SimpleNamespace(id=_model_id,
                                                  masked_fine_tuned=CheckpointMeta.from_dict(_meta).masked_fine_tuned))
compute_cells_form(_model_id, lambda: get_classifier(_model_id))  # before the store is read
store = ResultsStore()
view = select_view(store, _model_id)
render_summary(view, _model_id)

st.session_state.setdefault(PART_KEY, "curves")
part = st.segmented_control("Part", list(PARTS), format_func=PARTS.get, key=PART_KEY,
                            help="One part at a time: only the chosen one is read and computed.")
if view is not None:  # the view in the URL, shareable; marked applied, so only a view from outside is applied
    shown = {"run": view.run, **({"part": part} if part else {})}
    st.query_params.from_dict(shown)
    st.session_state[URL_APPLIED] = shown
if part is None:
    st.caption("Choose a part above: the curves, MaSF's p-values, ROAR, two models side by side, plausibility, "
               "budget, your own explanations or the evaluation suite.")
elif part in ("curves", "masf", "roar", "compare") and view is None:
    st.info("This part needs a benchmark run (above).")
elif part == "curves":
    curves_part(view)
elif part == "masf":
    masf_part(view)
elif part == "roar":
    roar_part(store, view)
elif part == "compare":
    from app.benchmark_compare import render_comparison
    from app.results_cache import rows_of

    render_comparison(rows_of(store), view, _model_id)
elif part == "plausibility":
    from app.benchmark_views import render_faith_plausibility

    render_faith_plausibility(view.data if view is not None else pd.DataFrame(), _model_id)
elif part == "budget":
    from app.benchmark_views import render_pareto

    render_pareto()
elif part == "own":
    from app.benchmark_views import render_upload

    render_upload(get_classifier(_model_id) if _model_id else None)
elif part == "evaluation":
    from app.evaluation_tab import render_evaluation_tab

    st.subheader("Standard evaluation suite: erasure metrics with MaSF shares, sanity checks, cost")
    render_evaluation_tab()
