"""Annotate: rank anonymised explanations, mark the tokens that justify a label, and see how the
measures rate with people (TrueSkill, Bradley-Terry, agreement, ERASER metrics)."""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.admin import require_admin
from app.annotation_widgets import rank_pickers, rationale_picker, show_explanations, show_input
from app.figure_export import chart
from app.figure_export import table as table_view
from app.plausibility_words import BRADLEY_TERRY_COLUMNS, TRUESKILL_COLUMNS, ranking_in_words
from app.progress import ThrottledProgress
from app.shared import selected_classifier
from app.text import md
from engine import EngineError, get_dataset, measure_availability
from engine.annotation import (
    MAX_NAME_LENGTH,
    AnnotationStore,
    AnnotationStoreError,
    export_text,
    new_submission_id,
    ordering_from_ranks,
    rankings_csv,
    summary,
)
from engine.plausibility import build_tasks

require_admin()  # served to a network, only the admin may use this page (app/admin.py)

NAME_KEY = "annotator_name"
FLASH_KEY = "annotate_flash"
# Default comparison: a baseline and three families (gradient, erasure, path); the first four that the model supports.
PREFERRED = ("random", "grad-l2", "loo-sign", "ig-sign", "x-grad-sign", "attention")

st.title("Annotate")
st.caption("Which explanation matches how you would explain the decision? Rank anonymised explanations, or mark "
           "the words that justify the label. Measures are rated from everyone's answers (docs/methods.md#plausibility-and-simulability).")
classifier = selected_classifier()
if classifier is None:
    st.stop()
model_id = classifier.id

try:
    store = AnnotationStore()
except AnnotationStoreError as err:
    st.error(md(err))
    st.stop()

name = st.text_input("Your name", key=NAME_KEY, max_chars=MAX_NAME_LENGTH,
                     help="Any text; it only groups your answers. No password.")
if name.strip():
    st.text(f"Annotating as: {name}")  # st.text: a name is shown as text, never as HTML or markdown
if FLASH_KEY in st.session_state:
    st.success(st.session_state.pop(FLASH_KEY))

with st.expander("Prepare annotation tasks", expanded=store.task_count(model_id) == 0):
    availability = measure_availability(classifier)
    measures = [m for m, why in availability.items() if not why]
    unavailable = {m: why for m, why in availability.items() if why}
    default = [m for m in PREFERRED if m in measures][:4] or measures[:3]
    chosen = st.multiselect("Measures to compare", measures, default=default, key="annotate_measures",
                            help="Only the measures this model supports. " + " ".join(
                                f"{m}: {why}." for m, why in unavailable.items()))
    n_examples = st.number_input("Test examples", min_value=1, max_value=500, value=10, key="annotate_n")
    if st.button("Prepare tasks", key="annotate_prepare"):
        if len(chosen) < 2:
            st.warning("Choose at least two measures: a ranking compares explanations.")
        else:
            meta = classifier.meta
            examples = get_dataset(meta.dataset, meta.split_seed).split("test")[: int(n_examples)]
            bar = ThrottledProgress(0.0, text="Explaining ...")
            try:
                tasks = build_tasks(classifier, examples, chosen,
                                    progress=lambda done, total: bar.update(done / total, f"Explained {done}/{total}"))
                added = store.add_tasks(tasks)
            except EngineError as err:  # a user-caused failure is one message; a bug keeps its traceback
                st.error(f"Tasks could not be prepared: {md(err)}")
            else:
                st.success(f"{added} new tasks ({len(tasks) - added} were already there).")

rank_tab, rationale_tab, results_tab = st.tabs(["Rank explanations", "Mark rationales", "Results"])


def submit(action, flash: str) -> None:
    try:
        action()
    except AnnotationStoreError as err:
        st.error(md(err))
    except ValueError as err:
        st.warning(md(err))
    else:
        st.session_state[FLASH_KEY] = flash
        st.rerun()


def next_task(kind: str, finished: str):
    """(task, done, total): this annotator's next task of `kind` ('ranking', 'rationale') with their progress; None
    with a line saying why where there is none (no name typed yet, or every task `finished`)."""
    if not name.strip():
        st.info("Type your name above to start.")
        return None, 0, 0
    task = store.next_task(model_id, name, kind)
    done, total = store.progress(model_id, name, kind)
    if task is None:
        st.success(f"No {kind} task left for model {md(model_id)}: {done} of {total} tasks {finished}.")
    return task, done, total


with rank_tab:
    task, done, total = next_task("ranking", "ranked")
    if task is not None:
        st.caption(f"Task {done + 1} of {total} · explained class: {md(task.target_name)} ({task.target_source or 'unknown'})")
        show_input(task.primary, task.auxiliary)
        as_tables = st.toggle("Show explanations as tables", key="annotate_tables")
        show_explanations(task.tokens, task.explanations, as_tables)
        ranks = rank_pickers([e.slot for e in task.explanations], key=f"rank_{task.id}")
        cannot = st.checkbox("Cannot decide", key=f"cannot_{task.id}")
        if st.button("Submit ranking", key=f"submit_ranking_{task.id}", type="primary"):
            if not cannot and any(r is None for r in ranks.values()):
                st.warning("Give every explanation a rank (equal numbers are ties), or tick Cannot decide.")
            else:
                # one id per task and session: a double click or a retry stores the ranking once
                sid = st.session_state.setdefault(f"submission_ranking_{task.id}", new_submission_id())
                submit(lambda: store.submit_ranking(task.id, name, () if cannot else ordering_from_ranks(ranks),
                                                    cannot_decide=cannot, submission_id=sid),
                       "Ranking saved; here is the next task.")

with rationale_tab:
    task, done, total = next_task("rationale", "marked")
    if task is not None:
        label = task.label_name if task.label_name is not None else task.target_name
        st.caption(f"Task {done + 1} of {total} · label to justify: {md(label)}")
        show_input(task.primary, task.auxiliary)
        selected = rationale_picker(task.tokens, key=f"rationale_{task.id}")
        if st.button("Submit rationale", key=f"submit_rationale_{task.id}", type="primary"):
            if not selected:
                st.warning("Select at least one token.")
            else:
                sid = st.session_state.setdefault(f"submission_rationale_{task.id}", new_submission_id())
                submit(lambda: store.submit_rationale(task.id, name, selected, submission_id=sid),
                       "Rationale saved; here is the next task.")


def table(rows: list[dict], columns: list[str] | dict[str, str]) -> None:
    """The rows' `columns`; a dict names them in words (engine column -> header)."""
    frame = pd.DataFrame(rows)[list(columns)]
    shown = frame.rename(columns=columns) if isinstance(columns, dict) else frame
    table_view(shown, f"annotate-{'-'.join(map(str, list(columns)[:2]))}", key=f"annotate_table_{'_'.join(map(str, columns))}",
               hide_index=True)


def fmt(value: float) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


with results_tab:
    try:
        data = summary(store, model_id)
    except AnnotationStoreError as err:
        st.error(md(err))
        st.stop()
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Tasks", data["tasks"])
    c2.metric("Rankings used", data["rankings_used"])
    c3.metric("Cannot decide", data["cannot_decide"])
    c4.metric("Rationales", data["rationales"])

    st.subheader("Rankings: TrueSkill")
    if data["trueskill"]:
        st.markdown("\n".join(f"- {md(line)}" for line in ranking_in_words(data["trueskill"], data["bradley_terry"],
                                                                           data["kendalls_w"])))
        ts = pd.DataFrame(data["trueskill"])
        fig = go.Figure(go.Bar(x=ts["measure"], y=ts["mu"], error_y={"type": "data", "array": 3 * ts["sigma"]},
                               name="mu ± 3 sigma"))
        fig.add_trace(go.Scatter(x=ts["measure"], y=ts["conservative"], mode="markers", name="mu - 3 sigma",
                                 marker={"symbol": "diamond", "size": 10}))
        fig.update_layout(title="Plausibility ranking of the measures", yaxis_title="TrueSkill rating (higher: more plausible)",
                          height=360)
        chart(fig, "annotate-trueskill", key="annotate_trueskill_chart")
        table(data["trueskill"], TRUESKILL_COLUMNS)
        st.caption("Each ranking is a free-for-all match between the measures shown (ties are draws); measures are "
                   "ordered by the conservative estimate mu - 3 sigma.")
        st.subheader("Cross-check: Bradley-Terry")
        table(data["bradley_terry"], BRADLEY_TERRY_COLUMNS)
        w = data["kendalls_w"]
        st.text(f"Kendall's W across annotators: {fmt(w['mean_W'])} (mean over {w['tasks']} tasks ranked by two or more)")
    else:
        st.info("No rankings yet.")

    st.subheader("Rationales (ERASER)")
    a = data["rationale_agreement"]
    st.text(f"Annotator agreement: Krippendorff's alpha {fmt(a['alpha'])}, mean Cohen's kappa {fmt(a['mean_kappa'])} "
            f"over {a['tasks']} tasks marked by two or more")
    cols = ["measure", "n", "k", "token_f1", "iou_f1", "auprc"]
    if data["against_annotated_rationales"]:
        st.caption("Each measure's scores against the annotators' rationales: token-F1 of the top-k tokens "
                   "(k = mean rationale length), IOU-F1 (span IOU at least 0.5), AUPRC.")
        table(data["against_annotated_rationales"], cols)
    else:
        st.info("No rationales yet.")
    if data["against_gold_rationales"]:
        st.markdown("**Against the bAbI supporting facts** (ground truth, no annotation needed)")
        table(data["against_gold_rationales"], cols)

    d1, d2 = st.columns(2)
    # built on click, in another thread (the store opens a connection per call, so that is safe)
    d1.download_button("Download all annotations (JSONL)", lambda: export_text(store).encode(),
                       file_name="annotations.jsonl", mime="application/jsonl")
    d2.download_button("Download rankings (CSV)", lambda: rankings_csv(store, model_id).encode(),
                       file_name=f"rankings-{model_id}.csv", mime="text/csv")
