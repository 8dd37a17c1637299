"""Explain: type or pick an input, see the model's prediction and its tokens."""
from __future__ import annotations

import pandas as pd
import streamlit as st
import torch

from app.shared import selected_classifier
from engine.data import get_dataset
from engine.models import EmptyInputError

st.title("Explain a prediction")
classifier = selected_classifier()
if classifier is None:
    st.stop()

meta = classifier.metadata
paired = bool(meta.get("paired"))
dataset = get_dataset(meta["dataset"], meta.get("split_seed", 0))
examples = dataset.split("test")[:50]

pick = st.selectbox("Start from a test example (optional)", ["(type your own)"] + [f"{i}: {e.primary[:80]}" for i, e in enumerate(examples)])
default_text, default_aux = "", ""
if pick != "(type your own)":
    example = examples[int(pick.split(":")[0])]
    default_text, default_aux = example.primary, example.auxiliary or ""
text = st.text_area("Text", value=default_text, height=120, max_chars=20000, placeholder="Type a review ...")
aux = st.text_input("Question (auxiliary sequence, never masked)", value=default_aux) if paired else None

if st.button("Explain", type="primary"):
    try:
        batch = classifier.batch([text], [aux] if paired else None)
    except EmptyInputError as err:
        st.warning(str(err))
        st.stop()
    with torch.no_grad():
        probs = torch.softmax(classifier.logits(batch).float(), -1)[0].cpu().numpy()
    predicted = int(probs.argmax())
    st.subheader(f"Prediction: {classifier.classes[predicted]} ({probs[predicted]:.1%})")
    st.dataframe(pd.DataFrame({"class": classifier.classes, "probability": probs}), hide_index=True)
    if bool(batch.truncated[0]):
        st.warning(f"The text was truncated to {classifier.max_length} tokens; only the kept part is classified.")
    tokens = classifier.tokenizer.convert_ids_to_tokens(batch.input_ids[0][batch.maskable[0]].tolist())
    st.caption(f"{len(tokens)} maskable tokens")
    st.text(" ".join(tokens))  # st.text shows user text as text, never as HTML or markdown
