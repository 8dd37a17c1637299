"""The Explain page's self-explanation section for prompted language models (docs/llm.md "In the dashboard";
Madsen, Chandar & Reddy 2024): the model is asked for a counterfactual, attribution or redaction explanation of
the typed text (`engine.selfexplain.explain_one`), its answer streams in as it is generated (KV cache,
`engine.selfexplain.generation.Generator`) with a Cancel button, and every intermediate text is shown with the
verdict faithful / unfaithful / not parsable. Finished answers are cached in SQLite by the engine
(ENGINE_GENERATIONS_DB), so asking again shows the cached answer without generating.

Every text the model or the user wrote is shown through `st.code` (never rendered as markdown or HTML) or `md`.
"""
from __future__ import annotations

import streamlit as st

from app.text import md
from engine.errors import EngineError

KEY = "selfexplain_"
KIND_HELP = {
    "counterfactual": "rewrite the text so that its sentiment becomes the opposite one: faithful when the rewrite is "
                      "then classified as that class",
    "attribution": "list the words the sentiment depends on; they are replaced by [REDACTED]: faithful when the model "
                   "then abstains (neutral / unknown)",
    "redaction": "rewrite the text with the important words replaced by [REDACTED]: faithful when the model then abstains",
}
VERDICT_ICONS = {"faithful": ":material/check_circle:", "unfaithful": ":material/cancel:",
                 "not parsable": ":material/help:", "skipped": ":material/block:"}


def ask(classifier, kind: str, text: str, max_new_tokens: int, on_text=None, should_stop=None):
    """One self-explanation of `text` (no gold label: the prediction stands for it, as for a typed text), generated
    greedily with the KV cache and cached on disk. Returns the `SelfExplanation` record."""
    from engine.selfexplain import DecodingSettings, Generator, explain_one, judge_classifier

    generator = Generator(classifier, DecodingSettings(max_new_tokens=int(max_new_tokens)))
    return explain_one(classifier, generator, kind, text, label=None, judge=judge_classifier(classifier),
                       on_text=on_text, should_stop=should_stop)


def _probabilities(probs: dict[str, float]) -> str:
    return ", ".join(f"{name} {p:.1%}" for name, p in sorted(probs.items(), key=lambda kv: -kv[1]))


def show_record(classifier, record) -> None:
    """Every intermediate text of a self-explanation, then the verdict."""
    verdict = record.verdict
    message = f"Verdict: **{verdict}**" + (f" ({md(record.reason)})" if record.reason else "")
    box = {"faithful": st.success, "unfaithful": st.error}.get(verdict, st.warning)
    box(message, icon=VERDICT_ICONS.get(verdict))
    st.markdown(f"**1. The model classifies the text**: {md(record.prediction)} ({md(_probabilities(record.probabilities))})")
    with st.expander("The classification prompt (the exact string)"):
        st.code(classifier.render(record.text)[0], language=None, wrap_lines=True)
    if record.prompt is None:
        return
    target = f" (target: {md(record.target)})" if record.target else ""
    st.markdown(f"**2. The request** for a {md(record.kind)} explanation{target}: the exact string the model continues")
    st.code(record.prompt, language=None, wrap_lines=True)
    st.markdown("**3. The model's answer**" + (" (from the generation cache: nothing was generated)" if record.cached
                                                else " (generated now)"))
    st.code(record.answer or "", language=None, wrap_lines=True)
    st.markdown("**4. The explanation parsed from it**")
    explanation = record.explanation
    if explanation is None:
        st.caption("none: the answer could not be read as this kind of explanation")
    else:
        st.code(", ".join(explanation) if isinstance(explanation, list) else str(explanation), language=None,
                wrap_lines=True)
    if record.edited_text is None:
        return
    st.markdown("**5. The text classified again**" + (" (the input up to case, spacing and punctuation)"
                                                      if record.unchanged else ""))
    st.code(record.edited_text, language=None, wrap_lines=True)
    st.markdown(f"**6. The re-classification**: {md(record.reclassification)} "
                f"({md(_probabilities(record.reprobabilities))})")


def self_explanation_section(classifier, text: str) -> None:
    """Drawn at the end of the Explain page for a prompted language model."""
    from engine.models.kinds import ModelKind
    from engine.selfexplain import KINDS

    if classifier.kind is not ModelKind.PROMPTED or classifier.spec.paired:
        return
    from app.availability import may, require

    st.subheader("Ask the model to explain itself")
    if not may("self-explain"):  # generation takes minutes of the server and writes its cache (app/availability.py)
        st.caption("Asking the model to explain itself generates text on the server: sign in as the admin, or run "
                   "`python -m engine self-explain` on your own machine.")
        return
    st.caption("A self-explanation is checked the way Madsen, Chandar & Reddy (2024) check it: the explanation is "
               "applied and the model classifies again. The answer streams in as it is generated; answers are cached "
               "on disk, so asking the same again shows the cached one.")
    c1, c2 = st.columns([2, 1])
    kind = c1.segmented_control("Kind", KINDS, key=KEY + "kind", default=KINDS[0],
                                help="\n".join(f"- {k}: {v}" for k, v in KIND_HELP.items())) or KINDS[0]
    max_new = c2.number_input("Longest answer (tokens)", 8, 1024, 64, step=8, key=KEY + "max_new_tokens")
    st.caption(md(KIND_HELP[kind]))
    if st.button("Ask for a self-explanation", key=KEY + "ask", type="primary"):
        require("self-explain")
        st.session_state.pop(KEY + "record", None)
        if not text.strip():
            st.warning("Type a text above first.")
            return
        cancel = st.empty()
        cancel.button("Cancel", key=KEY + "cancel", help="Stops the generation; nothing is cached.")
        live = st.empty()
        pieces: list[str] = []

        def on_text(piece: str) -> None:
            pieces.append(piece)
            with live.container():  # a click on Cancel stops the run here (Streamlit interrupts at its next call)
                st.markdown("**The model's answer, as it is generated**")
                st.code("".join(pieces) + " ▌", language=None, wrap_lines=True)

        try:
            with st.spinner("classifying and asking ..."):
                record = ask(classifier, kind, text, max_new, on_text=on_text)
        except EngineError as err:
            cancel.empty()
            live.empty()
            st.warning(md(err))
            return
        cancel.empty()
        live.empty()
        st.session_state[KEY + "record"] = (classifier.id, record)
    stored = st.session_state.get(KEY + "record")
    if stored is not None and stored[0] == classifier.id:
        record = stored[1]
        if record.text != text or record.kind != kind:
            st.caption("(the self-explanation below is of an earlier text or kind: ask again for this one)")
        show_record(classifier, record)
