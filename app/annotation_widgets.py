"""The widgets of one annotation task, shared by the Annotate page and a study's annotator view: the input, the
anonymised explanations as heatmaps, the rank pickers and the rationale picker. Every text a task carries
(input, tokens) is shown as text: st.text or the heatmap's escaped HTML, never markdown.

The explanations are anonymised, so nothing drawn may tell which measure made one: each is shown on one normalised
scale (its scores divided by its largest magnitude, so the strongest token is 1 or -1 whatever the measure's units),
with one colour bar for all of them that names no range. A bar per heatmap showed each measure's own range, and
random's (uniform on 0-1) always read 0-0.999."""
from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from app.heatmap import LEGEND_ABSOLUTE, LEGEND_SIGNED, token_heatmap_html
from engine.colours import hex_colour, score_rgb
from engine.importance.levels import Unit, aggregate

# The colours' names come from where the colours are defined (engine/colours.py), so the text cannot drift from them.
HEATMAP_HELP_SIGNED = f"Darker = more important · {LEGEND_SIGNED}."
HEATMAP_HELP_ABSOLUTE = f"Darker = more important · {LEGEND_ABSOLUTE}."
# a task with both kinds of explanation: the signed legend, and the unsigned one's colour clause
HEATMAP_HELP_BOTH = f"Darker = more important · {LEGEND_SIGNED} · unsigned ones: {LEGEND_ABSOLUTE.split(' · ')[0]}."


def show_input(primary: str, auxiliary: str | None) -> None:
    """The task's text (and a paired input's question)."""
    st.text(primary)
    if auxiliary:
        st.text(f"Question: {auxiliary}")


def normalised(scores: Sequence[float]) -> list[float]:
    """`scores` divided by their largest finite magnitude: in [-1, 1], the strongest token at 1 (or -1), whatever
    the measure's units; all zeros stay zeros (nothing to scale), a non-finite score stays as it is."""
    values = [float(v) for v in scores]
    top = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    return [v / top if top > 0 and math.isfinite(v) else v for v in values]


def shared_scale_html(signed_kinds: set[bool]) -> str:
    """The one colour bar of a task's explanations, in words (no numbers: no explanation's range is shown): from
    'against' through white to 'supports' for signed ones, from white to 'strongest' for unsigned ones."""
    def bar(stops: list[str]) -> str:
        return (f'<span style="display:inline-block;width:140px;height:10px;border:1px solid #999;'
                f'vertical-align:middle;background:linear-gradient(to right,{",".join(stops)})"></span>')

    parts = []
    if True in signed_kinds:
        parts.append("strongest against " + bar([hex_colour(score_rgb(-1, 1, True)), "#ffffff",
                                                  hex_colour(score_rgb(1, 1, True))]) + " strongest for")
    if False in signed_kinds:
        parts.append("none " + bar(["#ffffff", hex_colour(score_rgb(1, 1, False))]) + " strongest")
    return ('<div class="shared-scale" style="font-size:0.75rem;color:#555;margin-top:2px">'
            + " &nbsp;·&nbsp; ".join(parts) + " (each explanation scaled to its own strongest token)</div>")


def show_explanations(tokens: Sequence[str], explanations: Sequence, as_tables: bool = False,
                      units: Sequence[Unit] | None = None) -> None:
    """One heatmap (or token/score table) per explanation, each on the one normalised scale (`normalised`), with
    one shared colour bar under them (`shared_scale_html`); `explanations`: objects with `slot` (a letter) and
    `scores` (one float per token). units: show these words (each scored by the sum of its tokens' scores)
    instead of the tokens (engine.annotation.task_words)."""
    kinds = set()
    for e in explanations:
        signed = any(s < 0 for s in e.scores)
        kinds.add(signed)
        texts = list(tokens) if units is None else [u.text for u in units]
        scores = normalised(list(e.scores) if units is None else aggregate(e.scores, units, "sum").tolist())
        if as_tables:
            st.markdown(f"**Explanation {e.slot}**")  # a slot is a letter the store made, never user text
            st.dataframe(pd.DataFrame({"token" if units is None else "word": texts,
                                       "score (strongest = 1)": scores}), hide_index=True)
        else:
            st.html(token_heatmap_html(texts, scores, signed=signed, title=f"Explanation {e.slot}", scale_bar=False))
    if kinds and not as_tables:
        st.html(shared_scale_html(kinds))
    st.caption(HEATMAP_HELP_BOTH if kinds == {True, False} else HEATMAP_HELP_SIGNED if True in kinds
               else HEATMAP_HELP_ABSOLUTE)


def rank_pickers(slots: Sequence[str], key: str) -> dict[str, int | None]:
    """A rank selectbox per slot (1 = best; equal numbers are ties); returns slot -> rank or None."""
    n = len(slots)
    cols = st.columns(n)
    return {slot: cols[i].selectbox(f"Rank of {slot}", list(range(1, n + 1)), index=None, placeholder="rank",
                                    key=f"{key}_{slot}", help="1 = best; equal ranks are ties")
            for i, slot in enumerate(slots)}


def rationale_picker(tokens: Sequence[str], key: str, label: str = "Tokens that justify the label",
                     units: Sequence[Unit] | None = None) -> list[int]:
    """A multiselect of token positions (shown as `token (#i)`), or of words when `units` are given (shown as
    `word (#k)`, k counting words from 1), and a heatmap of the selection; returns the selected token positions
    (a word: all of its tokens), sorted."""
    tokens = list(tokens)
    if units is None:
        selected = st.multiselect(label, list(range(len(tokens))), format_func=lambda i: f"{tokens[i]} (#{i})", key=key)
        st.html(token_heatmap_html(tokens, [1.0 if i in selected else 0.0 for i in range(len(tokens))], signed=False,
                                   title="Your selection"))
        return selected
    words = list(units)
    chosen = st.multiselect(label, list(range(len(words))), format_func=lambda k: f"{words[k].text} (#{k + 1})", key=key)
    st.html(token_heatmap_html([u.text for u in words], [1.0 if k in chosen else 0.0 for k in range(len(words))],
                               signed=False, title="Your selection"))
    return sorted(i for k in chosen for i in words[k].tokens)
