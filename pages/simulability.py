"""Simulability (SMaT): how well students learn to simulate a frozen teacher when scaffolded by each explainer,
the head weights SMaT learned, and (bAbI) how plausible each explainer is against the supporting facts."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app.figure_export import chart
from app.figure_export import table as table_view
from app.follow_sidebar import follow, other_model_note
from engine.simulability.results import (
    head_auc_vs_weight,
    head_weight_history,
    load_simulability,
    plausibility_table,
    published_table,
    simulability_runs,
    simulation_summary,
    simulation_table,
)

st.title("Simulability: explanations that teach")
st.caption("A student sees a small budget of inputs labelled with the teacher's predictions; scaffolding it with the "
           "teacher's explanations should make it simulate the teacher better on the test split. SMaT learns a sparse "
           "weighting of all attention heads that scaffolds best (Fernandes et al. 2022).")
runs = simulability_runs()
if not runs:
    st.info("No simulability run yet. Example: `python -m engine simulability --teacher minilm-rt-masked-s0 "
            "--student tiny --budgets 250 500 --seeds 0 1 --explainers none attention-all smat`.")
    st.stop()

follow("simulability_run", runs)  # the sidebar's model's run first, and again when the sidebar's model changes
run = st.selectbox("Run", runs, key="simulability_run")
data = load_simulability(run)
meta = data.iloc[0]
st.caption(f"Teacher {meta['model']} ({meta['strategy']} fine-tuning) on {meta['dataset']}, student {meta['student']}.")
other_model_note(str(meta["model"]), "no simulability run here has it as the teacher (`python -m engine simulability "
                                     "--teacher ID` makes one).")

st.subheader("Simulation accuracy vs student budget")
summary = simulation_summary(data)
fig = go.Figure()
for i, (name, part) in enumerate(summary.groupby("explainer", observed=True)):
    color = f"hsl({(i * 67 + 10) % 360},65%,42%)"
    x = part["budget"].tolist()
    fig.add_trace(go.Scatter(x=x + x[::-1], y=part["q75"].tolist() + part["q25"].tolist()[::-1], fill="toself",
                             line={"width": 0}, fillcolor=color.replace("hsl", "hsla").replace("%)", "%,0.15)"),
                             hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(x=x, y=part["median"], mode="lines+markers", name=str(name), line={"color": color}))
fig.update_layout(xaxis_title="student training examples", yaxis_title="simulation accuracy (%)", xaxis_type="log",
                  height=420)
chart(fig, f"simulability-{run}", key="simulability_chart")
st.caption("Median over student seeds; band: 25th-75th percentile.")

c1, c2 = st.columns(2)
c1.markdown("**Measured here** (median [IQR] over seeds, n = seeds)")
with c1:
    table_view(simulation_table(data), f"simulability-{run}", key="simulability_table")
published, citation = published_table()
c2.markdown("**Published: SMaT Table 1** (another model and dataset: ELECTRA-small on IMDB, 500/1,000/2,000 examples)")
with c2:
    table_view(published, "smat-table1-published", key="simulability_published")
c2.caption(citation)

st.subheader("Learned head weights")
smat = data[(data["measure"] == "smat") & (data["metric"] == "head weight")]
if smat.empty:
    st.info("This run has no SMaT cell (explainer `smat`).")
else:
    c1, c2 = st.columns(2)
    budget = c1.selectbox("Budget", sorted(smat["budget"].unique()), key="simulability_budget")
    seed = c2.selectbox("Seed", sorted(smat[smat["budget"] == budget]["seed"].unique()), key="simulability_seed")
    steps, grid = head_weight_history(data, budget, seed)
    index = st.select_slider("Training step", options=list(range(len(steps))), value=len(steps) - 1,
                             format_func=lambda i: str(steps[i]),
                             key=f"simulability_step_{run}_{budget}_{seed}")  # snapshots differ per cell
    weights = grid[index]
    heat = go.Figure(go.Heatmap(z=weights, x=[f"H{h}" for h in range(weights.shape[1])],
                                y=[f"L{layer}" for layer in range(weights.shape[0])], colorscale="Viridis", zmin=0,
                                zmax=max(1e-6, float(grid.max())), colorbar={"title": "λ"}))
    heat.update_layout(xaxis_title="head", yaxis_title="layer", height=120 + 40 * weights.shape[0])
    chart(heat, f"smat-weights-{run}-{budget}-{seed}-{steps[index]}", key="simulability_heat")
    st.caption(f"Step {steps[index]}: {int((weights > 0).sum())} of {weights.size} heads kept (sparsemax gives exact "
               "zeros). Step 0 is the uniform start (= attention, all layers); snapshots after every epoch.")

plausible = plausibility_table(data)
if not plausible.empty:
    st.subheader("Plausibility against the supporting facts (bAbI)")
    st.caption("Sentence-level AUC per story (a sentence's score: the sum of the explanation's probabilities on its "
               "tokens), mean over test stories; 0.5 is chance. The best single head is chosen with the gold labels: "
               "an upper bound, not an explainer.")
    table_view(plausible, f"simulability-plausibility-{run}", key="simulability_plausible", hide_index=True)
    scatter = head_auc_vs_weight(data)
    if not scatter.empty and scatter["weight"].notna().any():
        sfig = go.Figure(go.Scatter(x=scatter["weight"], y=scatter["sentence AUC"], mode="markers",
                                    text=[f"L{int(a)} H{int(b)}" for a, b in scatter[["layer", "head"]].to_numpy()],
                                    marker={"size": 9}))
        sfig.update_layout(xaxis_title="learned weight λ (mean over SMaT cells)", yaxis_title="head's own sentence AUC",
                           height=400)
        chart(sfig, f"simulability-heads-{run}", key="simulability_heads")
        kept = scatter[scatter["weight"] > 0]
        if len(kept):
            st.caption(f"Heads kept: mean AUC {kept['sentence AUC'].mean():.3f}; all heads: "
                       f"{np.nanmean(scatter['sentence AUC']):.3f}.")
