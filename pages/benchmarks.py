"""Benchmarks: browse the results store: faithfulness curves, ACU/RACU, MaSF p-values per step,
beside the published numbers."""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from engine.faithfulness.summary import area_metrics_table, curve_bands
from engine.results import ResultsStore
from engine.results.published import load_published

st.title("Benchmarks")
store = ResultsStore()
data = store.load()
if data.empty:
    st.info(f"The results store ({store.root}) has no benchmark runs yet. Produce one with "
            "`python -m engine benchmark --help`.")
else:
    c1, c2, c3 = st.columns(3)
    run = c1.selectbox("Run", sorted(data["run"].unique()), key="bench_run")
    data = data[data["run"] == run]
    dataset = c2.selectbox("Dataset", sorted(data["dataset"].unique()), key="bench_dataset")
    data = data[data["dataset"] == dataset]
    model = c3.selectbox("Model", sorted(data["base_model"].dropna().unique()), key="bench_model")
    data = data[data["base_model"] == model]
    measures = sorted(data["measure"].unique())
    chosen = st.multiselect("Measures", measures, default=measures, key="bench_measures")
    data = data[data["measure"].isin(chosen)]

    st.subheader("Recursive masking curves")
    bands = curve_bands(data)
    fig = go.Figure()
    for i, (measure, band) in enumerate(bands.groupby("measure")):
        color = f"hsl({(i * 47) % 360},65%,45%)"
        fig.add_trace(go.Scatter(x=list(band["ratio"]) + list(band["ratio"])[::-1],
                                 y=list(band["high"]) + list(band["low"])[::-1], fill="toself", line={"width": 0},
                                 fillcolor=color.replace("hsl", "hsla").replace("%)", "%,0.15)"), hoverinfo="skip",
                                 showlegend=False, legendgroup=measure))
        fig.add_trace(go.Scatter(x=band["ratio"], y=band["mean"], name=measure, line={"color": color, "width": 3},
                                 legendgroup=measure))
        for seed, curve in data[data["measure"] == measure].groupby("seed"):
            fig.add_trace(go.Scatter(x=curve["ratio"], y=curve["value"], line={"color": color, "width": 1},
                                     opacity=0.4, showlegend=False, legendgroup=measure, name=f"{measure} seed {seed}"))
    metric = data["metric"].iloc[0] if not data.empty else "metric"
    fig.update_layout(xaxis_title="fraction of tokens masked", yaxis_title=f"test {metric}", height=480,
                      xaxis_tickformat=".0%")
    st.plotly_chart(fig, width="stretch")

    st.subheader("Area between the curves")
    table = area_metrics_table(data)
    if table.empty:
        st.info("ACU/RACU need the `random` baseline in the same run.")
    else:
        st.caption("RACU is unclipped (signed measures can exceed 100%); `racu_clipped` is R-ROAR's variant clipped "
                   "to [-100, 100]. Mean over seeds with 95% BCa bootstrap CIs.")
        st.dataframe(table, hide_index=True)

    if "p_below_005" in data.columns:
        st.subheader("MaSF: are the masked inputs still in distribution?")
        pfig = go.Figure()
        for measure, part in data.groupby("measure"):
            mean = part.groupby("ratio")["p_below_005"].mean()
            pfig.add_trace(go.Scatter(x=mean.index, y=mean.values, name=measure, mode="lines+markers"))
        pfig.add_hline(y=0.05, line_dash="dash", annotation_text="5% expected under the null")
        pfig.update_layout(xaxis_title="fraction of tokens masked", yaxis_title="share of inputs with p < 0.05",
                           xaxis_tickformat=".0%", yaxis_tickformat=".0%", height=380)
        st.plotly_chart(pfig, width="stretch")

    st.download_button("Download these rows (CSV)", data.to_csv(index=False).encode(), file_name=f"{run}-{dataset}-{model}.csv",
                       mime="text/csv")

st.subheader("Published numbers")
published, citation = load_published("fmm_table1")
st.caption(f"Published, not measured here: {citation}")
st.dataframe(published, hide_index=True)
roar, roar_citation = load_published("recursive_roar_table2")
with st.expander("Recursive ROAR (published)"):
    st.caption(roar_citation)
    st.dataframe(roar, hide_index=True)
