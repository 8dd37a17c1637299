"""A multiselect that follows the sidebar's model (app/follow_sidebar.follow_choice; Explain's measures). Streamlit keeps a
keyed multiselect's value when its options change, filtered to the new options: a switch to a model that offers none
of the chosen measures leaves the choice empty (the own-model browser test found Explain explaining nothing after a
model switch). follow_choice re-seeds it on a switch: what is still offered of the choice, else the defaults; a
reader's own choice, an empty one too, stands while the model does not change."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from app.shared import MODEL_KEY


def _page(follow: bool) -> None:
    """The page under test (AppTest runs this function's source as the script; `follow` comes as its argument)."""
    import streamlit as st

    from app.follow_sidebar import follow_choice
    from app.shared import MODEL_KEY

    offered = {"model-a": ["grad-l2", "ig-sign", "attention"], "model-b": ["grad-l2", "ig-sign"],
               "model-c": ["loo-sign"]}[st.session_state[MODEL_KEY]]
    if follow:
        follow_choice("measures", offered, ["grad-l2", "ig-sign", "loo-sign"])
    elif "measures" not in st.session_state:  # a first visit's defaults only
        st.session_state["measures"] = [m for m in ("grad-l2", "ig-sign", "loo-sign") if m in offered]
    st.multiselect("Measures", offered, key="measures")


def _app(follow: bool) -> AppTest:
    at = AppTest.from_function(_page, args=(follow,), default_timeout=60)
    at.session_state[MODEL_KEY] = "model-a"
    at.run()
    return at


def _switch(at: AppTest, model: str) -> list[str]:
    at.session_state[MODEL_KEY] = model
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at.multiselect(key="measures").value


def test_streamlit_leaves_a_keyed_multiselect_empty_when_the_new_options_hold_none_of_its_choice():
    at = _app(follow=False)
    at.multiselect(key="measures").set_value(["attention"])
    at.run()
    assert _switch(at, "model-b") == []  # the cause: nothing to explain after the switch


def test_a_switch_keeps_what_the_new_model_offers_of_the_choice_else_its_defaults():
    at = _app(follow=True)
    assert at.multiselect(key="measures").value == ["grad-l2", "ig-sign"], "first draw: the defaults offered"
    at.multiselect(key="measures").set_value(["attention"])
    at.run()
    assert _switch(at, "model-b") == ["grad-l2", "ig-sign"], "none of the choice is offered: the defaults"
    at.multiselect(key="measures").set_value(["ig-sign"])
    at.run()
    assert _switch(at, "model-a") == ["ig-sign"], "what is still offered of the choice stays chosen"
    assert _switch(at, "model-c") == ["loo-sign"]


def test_the_readers_own_choice_stands_while_the_model_does_not_change():
    at = _app(follow=True)
    at.multiselect(key="measures").set_value([])
    at.run()
    at.run()
    assert at.multiselect(key="measures").value == [], "an empty choice made on purpose is kept (the prediction alone)"
    at.multiselect(key="measures").set_value(["attention"])
    at.run()
    assert at.multiselect(key="measures").value == ["attention"]
