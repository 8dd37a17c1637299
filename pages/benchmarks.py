"""Benchmarks: browse the results store: faithfulness curves, ACU/RACU, MaSF p-values per step,
beside the published numbers."""
from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import palette
from app.benchmark_views import opening_run, render_faith_plausibility, render_pareto, render_upload
from app.column_labels import column_config
from app.compute_cells import compute_cells_form
from app.results_cache import rows_of
from app.shared import MODEL_KEY, get_classifier, note_if_not_masked_fine_tuned
from app.text import md
from engine.csv_safe import frame_to_csv
from engine.faithfulness.summary import area_metrics_table, compare_measures, curve_bands, preferred_example_set
from engine.importance import measure_label
from engine.results import ResultsStore
from engine.results.published import load_published
from engine.results.store import RECURSIVE_MASKING, is_count_schedule


def md_plotly(text: str) -> str:
    """Store text (model names) as plotly shows it: escaped, since plotly reads <b>, <a>, <br> in labels."""
    return html.escape(str(text))


METHOD_TITLE = {RECURSIVE_MASKING: "Recursive masking (no retraining)", "recursive-roar": "Recursive ROAR",
                "roar": "ROAR"}
SCHEDULE_HELP = ("ratio / quantile: a share of each input's tokens. count 0..N: k tokens per input (capped at its "
                 "length); ACU is then taken over k / N, so it stays a mean gap on the same scale.")
# The area table's reading order: the measure and its results first, then the CIs' methods.
AREA_ORDER = ["measure", "racu_pct", "racu_low", "racu_high", "acu_pct", "acu_low", "acu_high", "racu_clipped_pct",
              "racu_clipped_low", "racu_clipped_high", "seeds", "racu_ci", "acu_ci"]


def _area_column_order(table: pd.DataFrame) -> list[str]:
    """Results first; a grouping column is shown only where it varies (the filters above name the rest)."""
    varying = [c for c in table.columns if c not in AREA_ORDER and table[c].nunique(dropna=False) > 1]
    return [c for c in AREA_ORDER if c in table.columns] + varying


METHOD_HELP = ("recursive masking: a masked-fine-tuned model is fed the masked inputs, no retraining (FMM). "
               "roar: the level-0 model ranks once, a model is retrained at every level (Hooker et al.). "
               "recursive-roar: the model retrained at the previous level ranks the next tokens (R-ROAR).")


def _method_comparison(data, dataset: str) -> None:
    """One measure's mean curve per method (and model) of a dataset, each beside its random baseline."""
    # Only fraction schedules (ratio, quantile) share the x-axis; count curves stay in their own view above.
    part = data[(data["dataset"] == dataset) & ~data["schedule"].map(is_count_schedule)]
    if part["method"].nunique() < 2:
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
    fig.update_layout(xaxis_title="fraction of tokens masked", yaxis_title="test metric", xaxis_tickformat=".0%",
                      height=420 + 60 * groups, legend={"orientation": "h", "yanchor": "top", "y": -0.18,
                                                          "xanchor": "left", "x": 0})
    st.plotly_chart(fig, width="stretch")


def _paired_comparison(data: pd.DataFrame, measures: list[str]) -> None:
    """Is one measure more faithful than another on these seeds? RACU of a - b per seed, paired."""
    if len(measures) < 2:
        return
    with st.expander("Paired comparison of two measures"):
        c1, c2 = st.columns(2)
        a = c1.selectbox("Measure A", measures, index=0, key="bench_pair_a")
        b = c2.selectbox("Measure B", measures, index=1, key="bench_pair_b")
        if a == b:
            st.info("Pick two different measures.")
            return
        try:
            res = compare_measures(data, a, b)
        except ValueError as err:
            st.info(f"No paired comparison: {md(err)}")
            return
        if res["n"] == 0:
            st.info(f"{md(a)} and {md(b)} have no seed with a RACU for both (a flat random curve leaves RACU undefined).")
            return
        m1, m2, m3 = st.columns(3)
        m1.metric(f"RACU of {md(a)} - {md(b)}", f"{res['mean_difference']:+.1f} points")
        m2.metric("95% BCa CI", "none" if pd.isna(res["ci_low"]) else f"{res['ci_low']:+.1f} to {res['ci_high']:+.1f}")
        m3.metric("sign-flip p-value", "none" if pd.isna(res["p_value"]) else f"{res['p_value']:.3f}")
        st.caption(f"Paired over the {res['n']} seeds both measures have ({', '.join(map(str, res['seeds']))}): each seed's "
                   f"fine-tuned model is explained by both. The exact sign-flip test cannot go below "
                   f"{res['smallest_p_possible']:.3g} with {res['n']} seeds, however large the difference: more seeds, "
                   "not a larger effect, make it significant.")


st.title("Benchmarks")
_model_id = st.session_state.get(MODEL_KEY)
_classifier = get_classifier(_model_id) if _model_id else None
if _classifier is not None:
    note_if_not_masked_fine_tuned(_classifier)
compute_cells_form(_model_id, _classifier)  # before the store is read
store = ResultsStore()
data = rows_of(store)  # read once per state of the store (app/results_cache.py), not once a rerun
everything = data
if data.empty:
    st.info(f"The results store ({md(store.root)}) has no benchmark runs yet. Produce one with "
            "`python -m engine benchmark --help`.")
else:
    c1, c2, c3 = st.columns(3)
    runs = sorted(data["run"].unique())
    if st.session_state.get("bench_run") not in runs:  # open on the headline results, not the first name in the list
        st.session_state["bench_run"] = opening_run(data, _model_id)
    run = c1.selectbox("Run", runs, key="bench_run")
    data = data[data["run"] == run]
    dataset = c2.selectbox("Dataset", sorted(data["dataset"].unique()), key="bench_dataset")
    data = data[data["dataset"] == dataset]
    splits = sorted(data["split"].unique())
    if len(splits) > 1:
        # format_func=md: radio options render markdown, and these values come from the results store
        # A sweep of another split in the same run measures other examples: one split at a time.
        data = data[data["split"] == st.radio("Split", splits, horizontal=True, key="bench_split", format_func=md)]
    split = data["split"].iloc[0]
    model = c3.selectbox("Model", sorted(data["base_model"].dropna().unique()), key="bench_model")
    data = data[data["base_model"] == model]
    methods = sorted(data["method"].unique())
    method = st.radio("Method", methods, horizontal=True, key="bench_method", help=METHOD_HELP) if len(methods) > 1 else methods[0]
    data = data[data["method"] == method]
    retrained = method != RECURSIVE_MASKING
    # A run may hold several masking schedules (ROAR by quantile and by count) or checkpoints fine-tuned
    # differently (masked, plain): their curves share no x-axis or model, so one of each is shown at a time.
    schedules = sorted(data["schedule"].unique())
    schedule = (st.radio("Masking schedule", schedules, horizontal=True, key="bench_schedule", help=SCHEDULE_HELP)
                if len(schedules) > 1 else schedules[0])
    data = data[data["schedule"] == schedule]
    data = data.assign(strategy=data["strategy"].fillna("unknown"))  # a checkpoint that did not record it
    strategies = sorted(data["strategy"].unique())
    if len(strategies) > 1:
        data = data[data["strategy"] == st.radio("Fine-tuning", strategies, horizontal=True, key="bench_strategy", format_func=md)]
    grids = sorted(data["grid"].unique(), key=lambda g: (len(g.split(",")), g))
    if len(grids) > 1:
        # Cells of one run masked on different lists of levels (`--ratios` changed between sweeps): one at a time.
        data = data[data["grid"] == st.radio("Levels", grids, horizontal=True, key="bench_grid", format_func=md,
                                             help="The masking levels of the cells; curves on different levels are not pooled.")]
    counted = is_count_schedule(schedule)
    # Count schedules store k / k_max as `ratio` (the x of ACU); the plots show k itself.
    k_max = float(data["count"].max()) if counted else 1.0
    x_title = "tokens masked per input (k)" if counted else "fraction of tokens masked"
    x_format = None if counted else ".0%"
    measures = sorted(data["measure"].unique())
    if st.session_state.get("bench_measure_options") != measures:
        # Another run, dataset, model or method: start from all of its measures (a widget keeps its old choice,
        # filtered to the new options, which would silently hide most measures of the new view).
        st.session_state["bench_measure_options"] = measures
        st.session_state["bench_measures"] = measures
    chosen = st.multiselect("Measures", measures, key="bench_measures")
    data = data[data["measure"].isin(chosen)]
    if data["n_examples"].nunique() > 1:
        # A run may hold the whole split for most measures and a subset for an expensive one (beam), each with
        # its own random baseline: show one set of examples at a time (after the measure filter, whose options
        # span both, so a choice of measures survives switching).
        counts = sorted(int(n) for n in data["n_examples"].dropna().unique())
        n_examples = st.radio("Examples", counts, index=counts.index(preferred_example_set(data)), horizontal=True,
                              key="bench_examples",
                              format_func=lambda n: f"first {n} of the {split} split",
                              help="Measures computed on a subset are compared with the random baseline on the same subset.")
        data = data[data["n_examples"] == n_examples]

    st.subheader(f"{METHOD_TITLE.get(method, method)} curves")
    if retrained:
        st.caption("Each point is a model retrained on train/validation/test data with the measure's top tokens masked "
                   "(R-ROAR); the x-axis is " + ("the number of tokens masked per input (k)." if counted
                                                 else "the share of each input's tokens masked."))
    bands = curve_bands(data)
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
    fig.update_layout(xaxis_title=x_title + (", then retrained" if retrained else ""),
                      yaxis_title=f"{split} {metric}", height=480, xaxis_tickformat=x_format)
    st.plotly_chart(fig, width="stretch")

    st.subheader("Area between the curves")
    try:
        table = area_metrics_table(data)
    except ValueError as err:  # e.g. two checkpoints for one seed in one run: no pairing is meaningful
        st.error(f"ACU/RACU cannot be computed for this view: {md(err)}")
    else:
        if table.empty:
            st.info("ACU/RACU need the `random` baseline in the same run.")
        else:
            st.caption("Higher ACU and RACU: the measure's curve falls further below random masking, i.e. more faithful. "
                       "RACU is unclipped (signed measures can exceed 100%); the clipped column is R-ROAR's variant, "
                       "clipped to [-100, 100]. Mean over seeds with 95% bootstrap CIs (the CI method column: BCa, or "
                       "what stood in for it; one seed has none). Each measure is paired with the random curve of the "
                       "same seed."
                       + (" Count schedule: ACU is taken over k / k_max." if counted else ""))
            st.dataframe(table, hide_index=True, column_config=column_config(table),
                         column_order=_area_column_order(table))
            _paired_comparison(data, sorted(set(table["measure"]) - {"random"}))

    if "p_below_005" in data.columns and data["p_below_005"].notna().any():
        st.subheader("MaSF: are the masked inputs still in distribution?")
        pfig = go.Figure()
        for measure, part in data.groupby("measure"):
            mean = part.groupby("ratio")["p_below_005"].mean()
            pfig.add_trace(go.Scatter(x=mean.index * k_max, y=mean.values, name=measure, mode="lines+markers"))
        # the 5% line is named in the legend: a label on the line sat on the curves, which run along it
        x_ends = [float(data["ratio"].min() * k_max), float(data["ratio"].max() * k_max)]
        pfig.add_trace(go.Scatter(x=x_ends, y=[0.05, 0.05], mode="lines", name="5% expected under the null",
                                  line={"dash": "dash", "color": "black", "width": 1}, hoverinfo="skip"))
        pfig.update_layout(xaxis_title=x_title, yaxis_title="share of inputs with p < 0.05",
                           xaxis_tickformat=x_format, yaxis_tickformat=".0%", height=380)
        st.plotly_chart(pfig, width="stretch")

    _method_comparison(everything, dataset)
    render_faith_plausibility(data, _model_id, _classifier)

    st.download_button("Download these rows (CSV)", frame_to_csv(data).encode(), file_name=f"{run}-{dataset}-{model}.csv",
                       mime="text/csv")

with st.expander("Standard evaluation suite: erasure metrics with MaSF shares, sanity checks, cost", expanded=False):
    from app.evaluation_tab import render_evaluation_tab

    render_evaluation_tab()

render_pareto()
render_upload(_classifier)

st.subheader("Published numbers")
published, citation = load_published("fmm_table1")
st.caption(f"Published, not measured here: {citation}")
st.dataframe(published, hide_index=True, column_config=column_config(published))
roar, roar_citation = load_published("recursive_roar_table2")
with st.expander("Recursive ROAR (published)"):
    st.caption(roar_citation)
    st.dataframe(roar, hide_index=True, column_config=column_config(roar))
