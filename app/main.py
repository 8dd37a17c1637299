"""Entrypoint: `streamlit run app/main.py`. A frame: page navigation and the shared sidebar."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from app import admin, study_view
from app.shared import MODEL_KEY, PENDING_MODEL_KEY, usable_checkpoints
from app.text import md
from engine import CheckpointMeta
from engine.runtime import configure

ROOT = Path(__file__).resolve().parent.parent  # pages/ are files of the checkout

configure()
st.set_page_config(page_title="Faithfulness dashboard", page_icon=":material/search:", layout="wide")

# Open to a network with no admin secret: serve nothing (scripts/start.sh refuses to start so; this catches a
# bare `streamlit run --server.address 0.0.0.0`).
problem = admin.serving_problem()
if problem:
    st.error(problem, icon=":material/lock:")
    st.stop()
if study_view.is_study_link(st.query_params):
    # A study link: its holder sees the study and nothing else; with one page in the navigation, any other URL
    # path falls back to it, and no sidebar (model picker, sign-in) is drawn.
    st.navigation([st.Page(study_view.page, title="Study", icon=":material/rate_review:", default=True)],
                  position="hidden").run()
    st.stop()
is_admin = admin.is_admin()

checkpoints = usable_checkpoints()
if not is_admin:
    # choosing a built-in LM that was never converted writes its conversion to the server's disk
    checkpoints = [m for m in checkpoints if not m.get("builtin") or m["converted"]]
# a built-in prompted LM is offered but never chosen by default: opening the app must not convert and load an LLM
own = [m for m in checkpoints if not m.get("builtin")]
with st.sidebar:
    st.markdown("### Model")
    if not own:
        st.warning("No model in models_cache yet.")
    if checkpoints:
        ids = [m["id"] for m in checkpoints]
        # prefer a masked-fine-tuned model: its masked inputs stay in distribution
        default = next((i for i, m in enumerate(checkpoints) if m["strategy"] == "masked"), 0) if own else None
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
        meta = next((m for m in checkpoints if m["id"] == st.session_state[MODEL_KEY]), None)
        typed = None if meta is None else CheckpointMeta.from_dict(meta)
        if meta is None:
            pass
        elif meta.get("builtin"):
            st.caption(f"{md(meta['base_model'])} · prompted LM, zero-shot · masking writes "
                       f"{md(meta['replacement_token'])}" + ("" if meta["converted"] else " · converted on first use"))
        elif meta.get("registered"):
            kind = "prompted LM" if meta["strategy"] == "prompted" else "fine-tuned elsewhere"
            st.caption(f"{md(meta['base_model'])} · {kind} · {md(meta['path'])}")
        else:
            test = typed.test or {}
            st.caption(f"{md(typed.base_model)} · {md(typed.dataset)} · {md(typed.strategy)} fine-tuning · "
                       f"test {typed.metric or 'metric'} {test.get('unmasked', float('nan')):.3f}")
        if typed is not None and not typed.masked_fine_tuned:
            st.caption(":warning: Not masked-fine-tuned: inputs with masked tokens may be out of distribution for it. "
                       "Make it measurable on the Models page.")
    else:
        st.session_state[MODEL_KEY] = None
admin.sign_in_box()

EXPLAIN = str(ROOT / "pages" / "explain.py")
pages = [
    # The default page answers only at the app's root ("/"); its own url_path is never public, so it is named
    # apart from the alias below (url paths must be unique).
    st.Page(EXPLAIN, title="Explain", icon=":material/search:", default=True, url_path="start"),
    st.Page(str(ROOT / "pages" / "masking.py"), title="Step-by-step masking", icon=":material/layers_clear:"),
    st.Page(str(ROOT / "pages" / "benchmarks.py"), title="Benchmarks", icon=":material/monitoring:"),
    st.Page(str(ROOT / "pages" / "report_card.py"), title="Report card", icon=":material/fact_check:"),
    # free-form annotation writes to the server's store under any typed name: served to a network, people
    # annotate through a study's links instead, and only the admin has this page
    *([st.Page(str(ROOT / "pages" / "annotate.py"), title="Annotate", icon=":material/rate_review:")] if is_admin else []),
    st.Page(str(ROOT / "pages" / "attention.py"), title="Attention", icon=":material/visibility:"),
    st.Page(str(ROOT / "pages" / "simulability.py"), title="Simulability", icon=":material/school:"),
    # /explain?text=... (the path every other page has the form of: /masking, /models) opens the Explain page
    # too; without it Streamlit shows "Page not found" and then falls back to the default page.
    st.Page(EXPLAIN, title="Explain", icon=":material/search:", url_path="explain", visibility="hidden"),
]
if is_admin:
    # pages that change the server; a session that is not the admin has no such page, so their URLs fall back
    # to the start page (and each page checks again at its top)
    pages[-1:-1] = [
        st.Page(str(ROOT / "pages" / "models.py"), title="Models", icon=":material/model_training:"),
        st.Page(str(ROOT / "pages" / "data.py"), title="Your data", icon=":material/dataset:"),
        st.Page(str(ROOT / "pages" / "study_admin.py"), title="Studies", icon=":material/groups:", url_path="studies"),
    ]
st.navigation(pages).run()
