"""Attention: W&P's diagnostics on the BiLSTM-attention model, beside the published numbers, and one
input's base vs adversarial attention."""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app.figure_export import chart
from app.figure_export import table as table_view
from app.follow_sidebar import other_model_note
from app.heatmap import LEGEND_ABSOLUTE, token_heatmap_html
from app.shared import get_classifier, usable_checkpoints
from app.text import md
from engine import explain_text
from engine.attention.results import attention_runs, load_attention_results, wp_table
from engine.models import CheckpointError, EmptyInputError
from engine.results.published import load_published

st.title("Attention as explanation")
runs = attention_runs()
if not runs:
    st.info("No attention diagnostics yet. Run `python -m engine attention --dataset rt` (about 20 minutes on 2 cores).")
    st.stop()

labels = [f"{run} / {dataset}" for run, dataset in runs]
run, dataset = runs[labels.index(st.selectbox("Run / dataset", labels, key="attention_run"))]
summary, variance, adversaries = load_attention_results(run, dataset)
other_model_note(str(summary["base_model"]), "Wiegreffe & Pinter's diagnostics need a BiLSTM with additive attention "
                                             "(the model they studied), trained with seeds and adversaries of its own.")

st.subheader("W&P Tables 2-4: this project vs published")
ours = wp_table(summary)
c1, c2 = st.columns(2)
c1.caption(f"Measured here: {md(summary['base_model'])} on {md(dataset)} ({summary['provenance']['code_version']})")
with c1:
    table_view(ours, f"wp-tables-{dataset}", key="attention_ours", hide_index=True)
published, citation = load_published("wiegreffe_pinter")
c2.caption(f"Published (SST, IMDb; not measured here): {citation}")
with c2:
    table_view(published[published["dataset"].isin(["SST", "IMDb"])], "wp-tables-published", key="attention_published",
          hide_index=True)

st.subheader("Seed variance")
st.caption("JSD between the attention of models trained with other seeds and the base model's, per test input, "
           "against the base model's largest attention weight (binned), per predicted class.")
variance["max attention (binned)"] = (variance["max_attention"] * 10).clip(upper=9).astype(int) / 10
fig = go.Figure()
for cls, part in variance.groupby("predicted"):
    fig.add_trace(go.Violin(x=part["max attention (binned)"], y=part["jsd"], name=f"predicted {cls}", box_visible=True,
                            points=False, scalegroup=str(cls)))
fig.update_layout(violinmode="group", xaxis_title="base model's max attention", yaxis_title="JSD to base attention", height=400)
chart(fig, f"attention-seed-variance-{dataset}", key="attention_variance_chart")

st.subheader("Adversary: prediction change (TVD) vs attention change (JSD)")
tfig = go.Figure()
tfig.add_trace(go.Scatter(x=adversaries["jsd"], y=adversaries["tvd"], mode="markers+lines+text", name="adversary",
                          text=[f"λ={v:g}" for v in adversaries["lambda"]], textposition="top center"))
seed_points = variance.groupby("seed")[["jsd", "tvd"]].mean()
tfig.add_trace(go.Scatter(x=seed_points["jsd"], y=seed_points["tvd"], mode="markers", name="other random seeds",
                          marker={"symbol": "x", "size": 10}))
tfig.update_layout(xaxis_title="mean JSD of attention to the base model", yaxis_title="mean TVD of predictions", height=420)
chart(tfig, f"attention-adversary-{dataset}", key="attention_adversary_chart")
table_view(adversaries, f"attention-adversaries-{dataset}", key="attention_adversaries", hide_index=True)

st.subheader("One input: base vs adversarial attention")
text = st.text_input("Text", value="a gorgeous, witty, seductive movie", key="attention_text", max_chars=5000)
adversary_id = st.selectbox("Adversary", list(adversaries["model"]), key="attention_adversary")
# said before the click: a fresh clone ships the diagnostics' numbers but not the BiLSTMs they were measured on
have = {m.id for m in usable_checkpoints()}
missing = [m for m in dict.fromkeys([str(summary["base_model"]), str(adversary_id)]) if m not in have]
if missing:
    st.info(f"This needs the BiLSTM checkpoints the diagnostics ran on ({md(', '.join(missing))}), which are not in "
            f"models_cache: `python -m engine attention --dataset {dataset}` builds them (about 20 minutes on 2 "
            "cores). The tables and charts above need no model.")
if st.button("Show attention", key="attention_show", disabled=bool(missing)):
    try:
        for label, model_id in (("base", summary["base_model"]), ("adversary", adversary_id)):
            classifier = get_classifier(model_id)
            shown = explain_text(classifier, text, measures=["attention"])  # the additive attention weights
            probs = shown.probabilities
            st.html(token_heatmap_html(shown.tokens, shown.scores["attention"], signed=False,
                                       title=f"{label}: predicts {classifier.classes[int(probs.argmax())]} "
                                             f"({probs.max():.1%})"))
        st.caption(LEGEND_ABSOLUTE)
    except EmptyInputError as err:
        st.warning(md(err))
    except CheckpointError as err:
        st.warning(f"{md(err)}. The shipped results name models that live in models_cache; rebuild them with "
                   f"`python -m engine attention --dataset {dataset}`.")
