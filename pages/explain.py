"""Explain: type or pick an input; see the prediction and, per importance measure, a token heatmap,
a sortable score table and how much the measures agree."""
from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from app.heatmap import LEGEND_ABSOLUTE, LEGEND_SIGNED, token_heatmap_html
from app.shared import selected_classifier
from engine.data import get_dataset
from engine.errors import DataFileError
from engine.explain import LIVE_MEASURES, explain_text
from engine.importance import describe, measure_availability
from engine.models import EmptyInputError

st.title("Explain a prediction")
classifier = selected_classifier()
if classifier is None:
    st.stop()

meta = classifier.metadata
paired = bool(meta.get("paired"))
try:
    examples = get_dataset(meta["dataset"], meta.get("split_seed", 0)).split("test")[:50]
except DataFileError as err:  # a registered file that moved or changed: typing a text still works
    st.warning(f"No test examples to pick from: dataset {meta['dataset']!r} cannot be loaded.")
    st.code(str(err), language=None, wrap_lines=True)
    examples = []

pick = st.selectbox("Start from a test example (optional)", ["(type your own)"] + [f"{i}: {e.primary[:80]}" for i, e in enumerate(examples)])
default_text, default_aux = "", ""
if pick != "(type your own)":
    example = examples[int(pick.split(":")[0])]
    default_text, default_aux = example.primary, example.auxiliary or ""
text = st.text_area("Text", value=default_text, height=120, max_chars=20000, placeholder="Type a review ...", key="explain_text")
aux = st.text_input("Question (auxiliary sequence, never masked)", value=default_aux, key="explain_aux") if paired else None
c1, c2 = st.columns([3, 1])
availability = measure_availability(classifier)
available = [m for m, why in availability.items() if not why and m != "random"]
not_here = "; ".join(f"{m}: {why}" for m, why in availability.items() if why)
measures = c1.multiselect("Importance measures", available, default=[m for m in LIVE_MEASURES if m in available],
                          help="grad, x-grad, IG and LOO answer within a second; beam and the sampling-based captum "
                          "measures take longer. Only the measures this model supports are offered"
                          + (f" (not offered: {not_here})." if not_here else "."), key="explain_measures")
target_choice = c2.selectbox("Explain class", ["predicted"] + list(classifier.classes), key="explain_target")

if st.button("Explain", type="primary"):
    target = None if target_choice == "predicted" else classifier.classes.index(target_choice)
    try:
        with st.spinner("Explaining ..."):
            st.session_state["explanation"] = explain_text(classifier, text, aux if paired else None, measures, target)
    except EmptyInputError as err:
        st.session_state.pop("explanation", None)
        st.warning(str(err))

result = st.session_state.get("explanation")
if result is not None:
    probs = result.probabilities
    predicted = int(probs.argmax())
    st.subheader(f"Prediction: {classifier.classes[predicted]} ({probs[predicted]:.1%})")
    st.dataframe(pd.DataFrame({"class": classifier.classes, "probability": probs}), hide_index=True)
    st.caption(f"Explaining class **{classifier.classes[result.target]}** ({result.target_source}); "
               f"{len(result.tokens)} maskable tokens; scores use the logit of that class.")
    if result.truncated:
        st.warning(f"The text was truncated to {classifier.max_length} tokens; only the kept part is classified and explained.")
    for measure, why in result.errors.items():
        st.warning(f"{measure}: {why}")
    if not result.scores and not result.errors:
        st.text(" ".join(result.tokens))  # tokens as text when no measure was chosen
    names = list(result.scores)
    for row in range(0, len(names), 2):
        cols = st.columns(2)
        for col, measure in zip(cols, names[row : row + 2]):
            with col:
                col.html(token_heatmap_html(result.tokens, result.scores[measure], result.signed[measure], title=describe(measure)))
                col.caption(LEGEND_SIGNED if result.signed[measure] else LEGEND_ABSOLUTE)
                gap = result.extras.get(measure, {}).get("completeness_gap")
                if gap is not None:
                    col.caption(f"IG completeness gap: {gap[0]:+.4f} (sum of attributions minus f(x) - f(baseline))")
    if names:
        st.subheader("Scores")
        st.dataframe(result.table(), hide_index=True, key="explain_table")
        if len(names) > 1:
            st.subheader("Agreement between measures (Spearman rank correlation)")
            agreement = result.agreement()
            st.plotly_chart(px.imshow(agreement, zmin=-1, zmax=1, color_continuous_scale="RdBu", text_auto=".2f"),
                            width="stretch")
