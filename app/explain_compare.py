"""Two models side by side on one input (Explain's comparison mode, LIT's way: a mode of the page, not a page): a
second model picked beside the sidebar's explains the same text with the same measures, and each measure's two
heatmaps stand in one row, each labelled with its model, under each model's prediction.

The second model's explanation is computed once per (model, text, second text, measures, class) and kept in the
session, so switching the shown level or word score redraws it without computing it again. "Explain class": a class
by name is explained under the second model where it has a class of that name, else its own predicted class (said in
words).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from app.shared import convert_builtin_first, get_classifier, usable_checkpoints
from app.text import md

COMPARE_KEY = "explain_compare_model"  # the second model's id (the widget's key); "" for none
RESULT_KEY = "explain_compare_result"  # (what it was computed for, the Explanation)
NONE = ""


def second_model_options(first_id: str, admin: bool) -> list[str]:
    """The catalogue's models but the sidebar's, as the sidebar offers them (a built-in LLM that was never converted
    only to an admin: choosing it writes its conversion to the server's disk), with "" (none) first."""
    return [NONE] + [m["id"] for m in usable_checkpoints()
                     if m["id"] != first_id and (admin or not m.get("builtin") or m.get("converted"))]


def pick_second_model(first_id: str, admin: bool, container=st) -> str | None:
    """The selectbox "Side by side with"; the chosen id, or None. A choice that left the catalogue (or is now the
    sidebar's model) reads as none."""
    options = second_model_options(first_id, admin)
    if st.session_state.get(COMPARE_KEY) not in options:
        st.session_state[COMPARE_KEY] = NONE
    chosen = container.selectbox("Side by side with", options, key=COMPARE_KEY,
                                 format_func=lambda m: m or "(no second model)",
                                 help="A second model explains the same text with the same measures; each measure's "
                                      "two heatmaps are drawn side by side, each labelled with its model.")
    return chosen or None


def _target_for(second, first_classes: Sequence[str], target_choice: str) -> tuple[int | None, str | None]:
    """The class the second model explains (None: its predicted one) and, where the chosen class has no namesake
    there, why it explains its predicted class instead."""
    if target_choice == "predicted":
        return None, None
    if target_choice in second.classes:
        return list(second.classes).index(target_choice), None
    return None, (f"{second.id} has no class {target_choice!r} (its classes: {', '.join(second.classes)}): it "
                  "explains its predicted class")


def second_explanation(model_id: str, first_classes: Sequence[str], text: str, aux: str | None, measures: list[str],
                       target_choice: str):
    """(classifier, Explanation or None, notes): the second model's explanation of `text` with the measures it
    supports (each other one named in `notes`), computed once per inputs and kept in the session."""
    from engine.explain import by_cost, explain_text
    from engine.importance import measure_availability

    convert_builtin_first(model_id)  # a built-in LLM never converted: behind its progress bar, as the sidebar's
    second = get_classifier(model_id)
    paired = bool(second.meta.paired)
    availability = measure_availability(second)
    usable = [m for m in measures if not availability.get(m)]
    notes = [f"{second.id} cannot run {m}: {availability[m]}" for m in measures if availability.get(m)]
    target, why = _target_for(second, first_classes, target_choice)
    if why:
        notes.append(why)
    wanted = (model_id, text, aux if paired else None, tuple(usable), target)
    kept = st.session_state.get(RESULT_KEY)
    if kept is not None and kept[0] == wanted:
        return second, kept[1], notes
    from app.input_check import check_input
    from app.limits import admitted, capped

    check_input(second, text, aux if paired else None)
    # the same bounds as the first model's explanation when served to a network (app/limits.py)
    with st.spinner(f"Explaining the text with {second.id} too ..."), admitted("Explain"), capped(second, "Explain"):
        result = explain_text(second, text, aux if paired else None, by_cost(usable), target)
    st.session_state[RESULT_KEY] = (wanted, result)
    return second, result, notes


def prediction_words(classifier, result) -> str:
    """'pos (93.1%)': the class a model predicts for the input and its probability."""
    predicted = int(result.probabilities.argmax())
    return f"{classifier.classes[predicted]} ({result.probabilities[predicted]:.1%})"


def shared_scale(score_lists) -> float:
    """One colour scale for heatmaps drawn side by side: the largest finite |score| over all of them (each model's own
    largest would colour a score twice as large the same)."""
    from engine.colours import score_scale

    return max((score_scale(scores) for scores in score_lists), default=0.0)


def render_side_by_side(first, first_result, second, second_result, notes: list[str], level: str, aggregation: str,
                        heatmap: Callable) -> None:
    """Each model's prediction, then per measure one row: the sidebar model's heatmap left, the second model's right,
    each labelled with its model, both on one colour scale (shared_scale: the same colour is the same score on both
    sides). `heatmap(col, result, measure, units, level_scores, scale)` draws one (the page's)."""
    st.subheader(f"Side by side: {md(first.id)} and {md(second.id)}")
    for note in notes:
        st.caption(f":material/info: {md(note)}")
    sides = [(first, first_result, *first_result.level_scores(level, aggregation)),
             (second, second_result, *second_result.level_scores(level, aggregation))]
    for col, (classifier, result, _units, _scores) in zip(st.columns(2), sides):
        col.markdown(f"**{md(classifier.id)}** predicts **{md(prediction_words(classifier, result))}**; explains "
                     f"class **{md(classifier.classes[result.target])}** ({md(result.target_source)})")
    for measure in first_result.scores:
        cols = st.columns(2)
        scale = shared_scale([scores[measure] for _c, result, _u, scores in sides if measure in result.scores])
        for col, (classifier, result, units, scores) in zip(cols, sides):
            with col:
                col.caption(f"{md(classifier.id)} · {md(measure)}")
                if measure in result.scores:
                    heatmap(col, result, measure, units, scores, scale)
                elif measure in result.errors:
                    col.warning(f"{md(measure)}: {md(result.errors[measure])}")
                else:
                    col.caption(f"{md(measure)}: not run for {md(classifier.id)}")
