"""Entrypoint: `streamlit run app/main.py`. A frame: page navigation and the shared sidebar."""
from __future__ import annotations

import streamlit as st

from app import admin, availability, study_link
from app.shared import MODEL_KEY, PENDING_MODEL_KEY, usable_checkpoints
from app.text import md
from engine.models.kinds import ModelKind
from engine.runtime import code_version
from engine.settings import offline

offline()  # the dashboard is an entry point: no hub at run time (engine/settings.py)
# The code version is read now, when the server starts with the code it imported (engine.runtime.configure's
# reason); the rest of configure (transformers' log level, torch's threads) is done by the loaders, which call it
# before a model is loaded: a page that loads none imports neither torch nor transformers.
code_version()
st.set_page_config(page_title="Faithfulness dashboard", page_icon=":material/search:", layout="wide")

# Open to a network with no admin secret: serve nothing (scripts/start.sh refuses to start so; this catches a
# bare `streamlit run --server.address 0.0.0.0`).
problem = admin.serving_problem()
if problem:
    st.error(problem, icon=":material/lock:")
    st.stop()
role = availability.current_role()
# A study link, or a session that ever came with one (a page switch through the browser's history drops the link's
# parameters from the URL but not from the session): its holder sees the study and nothing else; with one page in
# the navigation, any other URL path falls back to it, and no sidebar (model picker, sign-in) is drawn.
if study_link.is_study_session(st.query_params, st.session_state) or role == availability.ANNOTATOR:
    from app import study_view

    role = availability.ANNOTATOR
    st.navigation([st.Page(study_view.page, title="Study", icon=":material/rate_review:", default=True)],
                  position="hidden").run()
    st.stop()
is_admin = role == availability.ADMIN

# the shipped masked-LoRA LLMs first (measurable by masking out of the box), then the rest in the catalogue's order
checkpoints = sorted(usable_checkpoints(), key=lambda m: not (m.builtin and m.masked_fine_tuned))
if not is_admin:
    # choosing a built-in LM that was never converted writes its conversion to the server's disk
    checkpoints = [m for m in checkpoints if not m.builtin or m.converted]
# a built-in prompted LM is offered but never chosen by default: opening the app must not convert and load an LLM
own = [m for m in checkpoints if not m.builtin]
with st.sidebar:
    st.markdown("### Model")
    if not own:
        st.warning("No model in models_cache yet.")
    if checkpoints:
        ids = [m.id for m in checkpoints]
        # prefer a masked-fine-tuned model of one's own (its masked inputs stay in distribution); never a built-in LM,
        # though those are listed first: opening the app must not convert and load an LLM
        mine = [i for i, m in enumerate(checkpoints) if not m.builtin]
        default = next((i for i in mine if checkpoints[i].meta.strategy == "masked"), mine[0]) if mine else None
        if st.session_state.get(PENDING_MODEL_KEY) in ids:
            st.session_state[MODEL_KEY] = st.session_state.pop(PENDING_MODEL_KEY)
        if st.session_state.get(MODEL_KEY) not in ids:
            # a shared view's model first: with only built-in LLMs there is no default, and the page stops before
            # it reads the URL
            url_model = st.query_params.get("model")
            st.session_state[MODEL_KEY] = url_model if url_model in ids else ids[default] if default is not None else None
        st.selectbox("Checkpoint", ids, key=MODEL_KEY, placeholder="choose a model",
                     help="models_cache/<id>, your registered models, and the built-in prompted language models "
                          "(converted from their package on first use): build more on the Models page")
        entry = next((m for m in checkpoints if m.id == st.session_state[MODEL_KEY]), None)
        if entry is None:
            pass
        elif entry.builtin:
            st.caption(f"{md(entry.meta.base_model)} · {entry.kind}, {md(entry.label or 'zero-shot')} · masking writes "
                       f"{md(entry.meta.replacement_token)}" + ("" if entry.converted else " · converted on first use"))
        elif entry.registered:
            kind = entry.kind if entry.kind is ModelKind.PROMPTED else "fine-tuned elsewhere"
            st.caption(f"{md(entry.meta.base_model)} · {kind} · {md(entry.path)}")
        else:
            typed = entry.meta
            test = typed.test or {}
            st.caption(f"{md(typed.base_model)} · {md(typed.dataset)} · {md(typed.strategy)} fine-tuning · "
                       f"test {typed.metric or 'metric'} {test.get('unmasked', float('nan')):.3f}")
        if entry is not None and not entry.masked_fine_tuned:
            st.caption(":warning: Not masked-fine-tuned: inputs with masked tokens may be out of distribution for it. "
                       "Make it measurable on the Models page.")
    else:
        st.session_state[MODEL_KEY] = None
admin.sign_in_box()

# which pages a session has: app/availability.py, the one table of who may open and compute what (a page that
# changes the server also checks again at its top, and each gated action where it runs)
st.navigation(availability.navigation(role)).run()
