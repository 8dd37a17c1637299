"""Whether a browser session is an annotator's (a study link's): the check the frame (app/main.py) makes on every
page, kept apart from the study's view (app/study_view.py), which imports the study store and the explanation
widgets, so that a dashboard page does not import them."""
from __future__ import annotations

from collections.abc import Mapping

from engine.annotation.invitations import TOKEN_PARAM

LINK_KEY = "study_link"  # the study link's parameters this browser session first came with


def is_study_link(query_params: Mapping[str, str]) -> bool:
    """Whether the URL is a study link (then the session sees only the study)."""
    return TOKEN_PARAM in query_params


def is_study_session(query_params: Mapping[str, str], session_state) -> bool:
    """Whether this browser session is an annotator's: its URL is a study link, or it ever came with one. Once a study
    link is seen, the session keeps to the study whatever the URL says next: a page switch in the browser (the history
    API: pushState to another path, then popstate) reruns the app with that path's URL, without the token, in the
    same session, and must not bring up the dashboard. The link's parameters are kept for `page()`."""
    if is_study_link(query_params):
        session_state[LINK_KEY] = {k: str(v) for k, v in query_params.items()}
        return True
    return LINK_KEY in session_state
