"""The annotator's view of a study: what a study link (`/?study_token=...`, or the open link with the crowd
worker's id, e.g. `&PROLIFIC_PID=...`) shows, and nothing else: consent, instructions, one task at a time,
progress, and a done page (with the completion code on an open link). No sidebar, no other page, no paths,
no model, dataset or measure names: the engine's `Session` and `Assignment` carry none.

The frame (app/main.py) routes a session whose URL carries a study token here and builds no other page.
The same link opened again (another day, another browser) resumes where its holder left off.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping

import streamlit as st

from app.study_link import LINK_KEY, is_study_link, is_study_session  # noqa: F401 (the frame's check)
from app.text import md
from engine.annotation import new_submission_id, ordering_from_ranks
from engine.annotation.invitations import TOKEN_PARAM
from engine.annotation.studies import (
    MAX_COMMENT_LENGTH,
    ParticipantReleasedError,
    StudyClosedError,
    StudyError,
    StudyStore,
    StudyTimeUpError,
)
from engine.annotation.task_words import task_words
from engine.errors import EngineError, InvalidInputError

SESSION_KEY = "study_session"  # (link key, engine Session) of this browser session
UNAVAILABLE = "The study cannot be reached right now; please try again later."
RESUME_NOTE = ("You can close this page at any time and come back with the same link: your answers are kept and "
               "you continue where you left off.")


def _link_params() -> Mapping[str, str]:
    """The study link's parameters: the URL's, or, after the browser moved to a URL without them, the link's."""
    params = st.query_params
    if is_study_link(params):
        return params
    return st.session_state.get(LINK_KEY, {})


def worker_id_from(query_params: Mapping[str, str], store: StudyStore) -> str | None:
    """The crowd worker's id from the URL: the value of any study's worker parameter (PROLIFIC_PID by default;
    the token is checked later, so which study it is is not known yet). An unfilled platform placeholder
    (`{{%PROLIFIC_PID%}}`) counts as none."""
    for name in sorted(store.worker_params()):
        value = query_params.get(name)
        if value and value.strip() and not value.strip().startswith("{{"):
            return value.strip()
    return None


def _paragraphs(text: str) -> None:
    """Organiser text (instructions, consent) as paragraphs of plain text: every character as typed."""
    for para in text.replace("\r\n", "\n").split("\n\n"):
        if para.strip():
            st.markdown(md(para))


def _refuse(message) -> None:
    st.error(md(message), icon=":material/block:")
    st.stop()


def _session(store: StudyStore, token: str, worker_id: str | None):
    """This browser session's engine Session: opened once per link (a rerun must not reopen a single-use link)."""
    key = hashlib.sha256(f"{token}\0{worker_id}".encode()).hexdigest()
    held = st.session_state.get(SESSION_KEY)
    if held and held[0] == key:
        return held[1]
    session = store.open_session(token, worker_id)
    st.session_state[SESSION_KEY] = (key, session)
    return session


def _done(store: StudyStore, session) -> None:
    progress = store.progress(session)
    st.success(f"Thank you: you have finished this study ({progress.answered} of {progress.total} answered).",
               icon=":material/task_alt:")
    if session.worker_id is not None and progress.completion_code:
        st.markdown("Your completion code (enter it on the platform that sent you here):")
        st.code(progress.completion_code, language=None)


def _task(store: StudyStore, session, assignment) -> None:
    # imported here: the frame (app/main.py) imports this module on every page, and the widgets' heatmaps import the
    # engine's measures (torch)
    from app.annotation_widgets import rank_pickers, rationale_picker, show_explanations, show_input

    task = assignment.task
    aid = assignment.assignment_id
    if assignment.note:
        st.info(md(assignment.note), icon=":material/priority_high:")
    if task.class_name is not None:
        st.caption(f"Explained decision: **{md(task.class_name)}**")
    show_input(task.primary, task.auxiliary)
    units = None if session.shown_as == "token" else task_words(task.primary, task.tokens)  # the study's choice
    show_explanations(task.tokens, task.explanations, units=units)
    ranks, cannot, selected = None, False, None
    if "ranking" in assignment.kinds:
        st.markdown("**Rank the explanations** (1 = most convincing; equal numbers are ties)")
        ranks = rank_pickers(task.slots, key=f"study_rank_{aid}")
        cannot = st.checkbox("Cannot decide", key=f"study_cannot_{aid}")
    if "rationale" in assignment.kinds:
        selected = rationale_picker(task.tokens, key=f"study_rationale_{aid}",
                                    label="Words that justify the decision", units=units)
    comment = st.text_area("Comment (optional)", key=f"study_comment_{aid}", max_chars=MAX_COMMENT_LENGTH)
    if not st.button("Submit and continue", key=f"study_submit_{aid}", type="primary"):
        return
    if ranks is not None and not cannot and any(r is None for r in ranks.values()):
        st.warning("Give every explanation a rank (equal numbers are ties), or tick Cannot decide.")
        return
    ordering = () if ranks is None or cannot else ordering_from_ranks(ranks)
    # one id per assignment and session: a double click or a retry after a lost reply stores the answer once
    sid = st.session_state.setdefault(f"study_submission_{aid}", new_submission_id())
    try:
        store.submit(session, aid, ordering=ordering, cannot_decide=cannot, rationale=selected,
                     comment=comment.strip() or None, submission_id=sid)
    except (StudyClosedError, StudyTimeUpError, ParticipantReleasedError) as err:
        _refuse(err)
    except (StudyError, InvalidInputError) as err:
        st.warning(md(err))
        return
    except EngineError:
        _refuse(UNAVAILABLE)
    st.rerun()


def page() -> None:
    """The whole annotator view (a callable page of st.navigation)."""
    params = _link_params()
    token = params.get(TOKEN_PARAM, "")
    try:
        store = StudyStore()
        session = _session(store, token, worker_id_from(params, store))
    except (StudyError, InvalidInputError) as err:  # a wrong, closed, withdrawn, used or full link: a refusal
        _refuse(err)
        return
    except EngineError:  # the store itself failed: its message may name server paths, which annotators never see
        _refuse(UNAVAILABLE)
        return
    st.title(md(session.title), anchor=False)
    try:
        progress = store.progress(session)
        if not progress.finished and not store.consented(session):
            # consent before any task is taken: a visitor who leaves here holds no task another annotator needs
            st.subheader("Consent")
            _paragraphs(session.consent)
            st.subheader("Instructions")
            _paragraphs(session.instructions)
            st.caption(RESUME_NOTE)
            agreed = st.checkbox("I have read the above and agree to take part", key="study_consent_box")
            if st.button("Start", type="primary", disabled=not agreed, key="study_start"):
                store.record_consent(session)  # kept with the participant and exported
                st.rerun()
            return
        assignment = store.next_assignment(session)
        progress = store.progress(session)
    except (StudyClosedError, StudyTimeUpError, ParticipantReleasedError) as err:
        _refuse(err)
        return
    if assignment is None:
        _done(store, session)
        return
    st.progress(min(progress.answered / max(progress.total, 1), 1.0),
                text=f"Task {assignment.sequence} of {assignment.total} · {progress.answered} answered")
    if session.deadline:
        st.caption(f"Time limit: until {session.deadline[:16].replace('T', ' ')} UTC.")
    with st.expander("Instructions"):
        _paragraphs(session.instructions)
        st.caption(RESUME_NOTE)
    _task(store, session, assignment)
