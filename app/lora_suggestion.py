"""A note on the Explain page for a prompted LM that was not masked-fine-tuned: masking writes a replacement
([REDACTED]) it never read in training, so its masked inputs are out of distribution and masking-based scores
(LOO, occlusion, SHAP, the curves) measure the redaction as much as the explanation. When a built-in masked-LoRA
model of the same LLM is shipped (`engine.models.builtin_llms`), the note offers a button that switches the
sidebar to it."""
from __future__ import annotations

import streamlit as st

from app.shared import PENDING_MODEL_KEY, usable_checkpoints
from app.text import md
from engine.models.kinds import ModelKind


def lora_for(classifier) -> str | None:
    """The id of the shipped masked-LoRA model of the same packaged LLM, when the classifier is a prompted LM that was
    not fine-tuned here (zero-shot: its strategy is none of the training strategies, so not a LoRA of any kind) and
    that model is offered in the sidebar; else None."""
    from engine.models.builtin_llms import BUILTINS, LORA_OF
    from engine.models.metadata import STRATEGIES

    meta = classifier.meta
    if meta.masked_fine_tuned or meta.strategy in STRATEGIES:
        return None
    candidate = LORA_OF.get(classifier.id) or next(
        (b.model_id for b in BUILTINS.values() if b.adapter and b.llm == meta.base_model), None)
    offered = {m["id"] for m in usable_checkpoints()}
    return candidate if candidate in offered else None


def suggest_masked_lora(classifier) -> None:
    """The note and its button (nothing when there is nothing to suggest)."""
    if classifier.kind is not ModelKind.PROMPTED:
        return
    target = lora_for(classifier)
    if target is None:
        return
    replacement = classifier.meta.replacement_token or "the replacement"
    note, button = st.columns([4, 1])
    note.info(f"**{md(classifier.id)}** was not masked-fine-tuned: masked inputs (with {md(replacement)}) are out of "
              f"distribution for it, so LOO, occlusion, SHAP and the masking curves measure the redaction as much as the "
              f"explanation. **{md(target)}** is the same LLM masked-fine-tuned with LoRA (shipped adapter): "
              "its masked inputs are in distribution.", icon=":material/lightbulb:")
    if button.button(f"Use {target}", key="explain_use_masked_lora"):
        st.session_state[PENDING_MODEL_KEY] = target  # applied by the frame before the page runs again
        st.rerun()
