"""Shareable views: a page's inputs live in the URL's query parameters (`?model=...&text=...&measures=...`),
so copying the address reproduces the view in another browser.

A page calls `arrived_from_url` before drawing its widgets: when the URL holds a view this session has not
applied yet, its values are written into the widgets' session-state keys (and the sidebar's model is
switched through the frame's pending-model key), and the page runs the view once. After a run the page
calls `publish`, which writes the view into the URL and marks it applied, so a rerun does not repeat it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import streamlit as st

from app.shared import MODEL_KEY, PENDING_MODEL_KEY, usable_checkpoints


def _applied_key(page: str) -> str:
    return f"{page}_url_applied"


def current_view() -> dict[str, str]:
    return {k: st.query_params[k] for k in st.query_params}


def arrived_from_url(page: str, fields: Mapping[str, tuple[str, Callable[[str], object]]]) -> bool:
    """Apply the URL's view to the widgets of `page` once; True when the page should run it now.

    fields: query parameter -> (session-state key of its widget, parser of the parameter's text); a value
    the parser refuses (returns None) is left out. The `model` parameter switches the sidebar's model."""
    view = current_view()
    if not view.get("text") or st.session_state.get(_applied_key(page)) == view:
        return False
    model = view.get("model")
    if model and model != st.session_state.get(MODEL_KEY) and model in {m.id for m in usable_checkpoints()}:
        st.session_state[PENDING_MODEL_KEY] = model  # applied by the frame before the page runs again
        st.rerun()
    for name, (key, parse) in fields.items():
        if name in view:
            value = parse(view[name])
            if value is not None:
                st.session_state[key] = value
    st.session_state[_applied_key(page)] = view
    return True


def publish(page: str, view: Mapping[str, str | None]) -> None:
    """Write `view` (empty values left out) into the URL, as the view this session already shows."""
    clean = {k: str(v) for k, v in view.items() if v not in (None, "")}
    st.query_params.from_dict(clean)
    st.session_state[_applied_key(page)] = clean


def split_list(text: str) -> list[str]:
    return [part for part in text.split(",") if part]
