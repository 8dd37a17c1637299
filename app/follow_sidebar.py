"""The pages that show stored results of some model (Benchmarks, the Report card, the evaluation suite, Simulability,
Attention) open on the sidebar's model where the store has results of it, move to it when the sidebar's model changes
(`follow`), and otherwise say in one line whose results they show and why. Nothing is loaded: the sidebar's entry is read from the catalogue (app.shared.usable_checkpoints)."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from app.shared import MODEL_KEY, usable_checkpoints
from app.text import md


def sidebar_model() -> dict | None:
    """The sidebar's catalogue entry (id, base_model, dataset, strategy, ...), or None when none is chosen."""
    model_id = st.session_state.get(MODEL_KEY)
    if not model_id:
        return None
    return next((m for m in usable_checkpoints() if m["id"] == model_id), {"id": model_id})


def sidebar_names() -> list[str]:
    """What results of the sidebar's model are filed under, most specific first: its id, its base model and dataset
    (a run named `tiny-rt-...`, `tiny-babi1-...`), then its base model (the family a run names, e.g. `tiny`)."""
    meta = sidebar_model()
    if meta is None:
        return []
    base, dataset = meta.get("base_model"), meta.get("dataset")
    recipes = [f"{base}-{dataset}", f"{base}-{str(dataset).replace('-', '')}"] if base and dataset else []
    return [str(n) for n in dict.fromkeys([meta.get("id"), *recipes, base]) if n]


def preferred(options: Sequence[str], names: Sequence[str] | None = None) -> str | None:
    """The first of `options` that is one of `names` (default: sidebar_names), else the first whose name starts
    with one of them and a hyphen (a run named after its model, `tiny-rt-card`), else None."""
    names = sidebar_names() if names is None else [n for n in names if n]
    for name in names:
        if name in options:
            return name
    for name in names:
        hit = next((o for o in options if str(o).startswith(f"{name}-")), None)
        if hit is not None:
            return hit
    return None


def preferred_index(options: Sequence[str], names: Sequence[str] | None = None) -> int:
    """`preferred`'s position in `options` (0 when none is the sidebar's): a selectbox's first choice."""
    hit = preferred(options, names)
    return list(options).index(hit) if hit is not None else 0


def other_model_note(shown: str, why: str) -> None:
    """One line under a page's selectors when what it shows is not the sidebar's model: whose it is and why."""
    meta = sidebar_model()
    if meta is None or shown in sidebar_names():
        return
    st.caption(f":material/info: Shown: {md(shown)}, not the sidebar's model ({md(meta['id'])}): {why}")


def follow(key: str, options: Sequence[str], names: Sequence[str] | None = None,
           choose: Callable[[], str | None] | None = None) -> None:
    """Before the selectbox keyed `key` over `options` is drawn: when the sidebar's model changed since the box was
    last drawn, its value becomes the sidebar's model's option (`choose()`, else `preferred(options, names)`; a box
    none of whose options is the model's keeps its value), so the page follows the sidebar; a value that is not an
    option becomes that choice or the first option. A value set before the box's first draw (a shared URL's) and a
    choice made for the same sidebar model are kept.

    Set by assignment before the widget is drawn (a keyed selectbox keeps its value whatever its `index`: Streamlit
    identifies it by its key alone), so the browser's box and the numbers under it agree."""
    model = st.session_state.get(MODEL_KEY)
    seen = f"{key}__sidebar_model"
    changed = seen in st.session_state and st.session_state[seen] != model
    st.session_state[seen] = model
    current = st.session_state.get(key)
    if not options or not (changed or current not in options):
        return
    hit = choose() if choose is not None else preferred(options, names)
    if hit in options:
        st.session_state[key] = hit
    elif current not in options:
        st.session_state[key] = options[0]


def follow_choice(key: str, options: Sequence[str], defaults: Sequence[str]) -> None:
    """Before the multiselect keyed `key` over `options` is drawn: on its first draw, and when the sidebar's model
    changed since it was last drawn, its value becomes what is still chosen of `options`, or `defaults` where none
    is; otherwise the reader's choice stands (an empty one too).

    Streamlit keeps a keyed multiselect's value when its options change, filtered to the new options: after a switch
    to a model that offers none of the chosen measures the value is empty, and a page that explains the chosen ones
    explains nothing (tests/app/test_follow_choice.py)."""
    model = st.session_state.get(MODEL_KEY)
    seen = f"{key}__sidebar_model"
    changed = st.session_state.get(seen) != model
    st.session_state[seen] = model
    if changed or key not in st.session_state:
        kept = [m for m in st.session_state.get(key) or [] if m in options]
        st.session_state[key] = kept or [m for m in defaults if m in options]
