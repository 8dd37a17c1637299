"""The widgets of one annotation task, shared by the Annotate page and a study's annotator view: the input, the
anonymised explanations as heatmaps, the rank pickers and the rationale picker. Every text a task carries
(input, tokens) is shown as text: st.text or the heatmap's escaped HTML, never markdown."""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from app.heatmap import token_heatmap_html

HEATMAP_HELP = "Darker = more important (signed: red supports the explained class, blue speaks against it)."


def show_input(primary: str, auxiliary: str | None) -> None:
    """The task's text (and a paired input's question)."""
    st.text(primary)
    if auxiliary:
        st.text(f"Question: {auxiliary}")


def show_explanations(tokens: Sequence[str], explanations: Sequence, as_tables: bool = False) -> None:
    """One heatmap (or token/score table) per explanation; `explanations`: objects with `slot` (a letter) and
    `scores` (one float per token)."""
    for e in explanations:
        signed = any(s < 0 for s in e.scores)
        if as_tables:
            st.markdown(f"**Explanation {e.slot}**")  # a slot is a letter the store made, never user text
            st.dataframe(pd.DataFrame({"token": list(tokens), "score": list(e.scores)}), hide_index=True)
        else:
            st.html(token_heatmap_html(list(tokens), list(e.scores), signed=signed, title=f"Explanation {e.slot}"))
    st.caption(HEATMAP_HELP)


def rank_pickers(slots: Sequence[str], key: str) -> dict[str, int | None]:
    """A rank selectbox per slot (1 = best; equal numbers are ties); returns slot -> rank or None."""
    n = len(slots)
    cols = st.columns(n)
    return {slot: cols[i].selectbox(f"Rank of {slot}", list(range(1, n + 1)), index=None, placeholder="rank",
                                    key=f"{key}_{slot}", help="1 = best; equal ranks are ties")
            for i, slot in enumerate(slots)}


def rationale_picker(tokens: Sequence[str], key: str, label: str = "Tokens that justify the label") -> list[int]:
    """A multiselect of token positions (shown as `token (#i)`) and a heatmap of the selection; returns the
    selected positions."""
    tokens = list(tokens)
    selected = st.multiselect(label, list(range(len(tokens))), format_func=lambda i: f"{tokens[i]} (#{i})", key=key)
    st.html(token_heatmap_html(tokens, [1.0 if i in selected else 0.0 for i in range(len(tokens))], signed=False,
                               title="Your selection"))
    return selected
