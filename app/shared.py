"""What every page shares: the one cached model loader and the sidebar's model choice.

Pages read from the engine through here; the engine never reads from a page.
"""
from __future__ import annotations

import streamlit as st

from app.text import md
from engine.errors import CheckpointError
from engine.models.catalogue import CatalogueEntry, model_catalogue

MODEL_KEY = "model_id"
PENDING_MODEL_KEY = "model_id_pending"  # set by a page that built a model; applied by the frame


def load_classifier(model_id: str):
    """engine.load_classifier, imported on the first load: the frame and a page that loads no model do not import
    the loaders (torch, transformers)."""
    from engine import load_classifier as load

    return load(model_id)


@st.cache_resource(show_spinner="Loading model ...", max_entries=4)
def get_classifier(model_id: str):
    """Loaded once per process and model, not per rerun."""
    return load_classifier(model_id)


def usable_checkpoints() -> list[CatalogueEntry]:
    """The models the sidebar offers: engine.models.catalogue's typed entries (checkpoints trained here, the user's
    registered models, the built-in prompted LMs whose package is installed), in its order. Nothing is loaded or
    converted to list them."""
    return model_catalogue()


def convert_with_progress(llm_key: str) -> None:
    """Convert the packaged LLM `llm_key` into the models cache (once) behind a real progress bar: the chunks
    joined, each tensor dequantised, the folder written, in words (engine.models.llm_package.packaged_llm_folder's
    `progress`). Nothing is drawn when it is converted already."""
    from app.progress import ThrottledProgress
    from engine.models.llm_package import PACKAGED_LLMS, converted_dir, packaged_llm_folder

    folder = converted_dir(llm_key)
    if (folder / "model.safetensors").is_file() and (folder / "config.json").is_file():
        return
    cost = PACKAGED_LLMS[llm_key].cost if llm_key in PACKAGED_LLMS else "a few minutes"
    bar = ThrottledProgress(0.0, text=f"Converting {llm_key} from its GGUF file into the models cache, once ({cost}) ...")
    packaged_llm_folder(llm_key, show_progress_bar=False,
                        progress=lambda what, share: bar.update(share, text=f"Converting {llm_key} (once): {what}"))
    bar.empty()


def convert_builtin_first(model_id: str) -> None:
    """A built-in prompted LM whose packaged LLM is not converted yet is converted here, with its progress bar,
    before the cached load (whose spinner says nothing of a minute-long conversion)."""
    from engine.models.builtin_llms import BUILTINS

    builtin = BUILTINS.get(model_id)
    if builtin is not None:
        convert_with_progress(builtin.llm)


def offered_measures(classifier) -> tuple[list[str], str]:
    """(offered, not offered): the measures that can explain `classifier`, in registry order, but random (the
    baseline, not an explanation to pick), and those that cannot with why, as words ('id: why; ...', '' for none).
    What Explain and Step-by-step masking offer."""
    from engine.importance import measure_availability  # torch: a page that shows a model has loaded it

    availability = measure_availability(classifier)
    return ([m for m, why in availability.items() if not why and m != "random"],
            "; ".join(f"{m}: {why}" for m, why in availability.items() if why))


def selected_classifier():
    """The classifier chosen in the sidebar, or None (with a message in the page) when there is none."""
    model_id = st.session_state.get(MODEL_KEY)
    if not model_id:
        st.info("No model yet: build one on the **Models** page (about 2 minutes for the default).")
        return None
    try:
        convert_builtin_first(model_id)
        return get_classifier(model_id)
    except CheckpointError as err:
        st.error(f"Model {md(repr(model_id))} cannot be loaded: {md(err)}")
        return None


def note_if_not_masked_fine_tuned(classifier) -> None:
    """A visible note on the pages that mask: a model that was not masked-fine-tuned reads [MASK] (or its
    replacement token) as something it never saw, so its masked inputs are out of distribution; MaSF's
    p-values say how far, and masked fine-tuning from it makes it measurable."""
    if classifier.masked_fine_tuned:
        return
    st.warning(f"**{md(classifier.id)} was not masked-fine-tuned**: the inputs masking makes are likely out of distribution "
               "for it, so a falling curve may measure that rather than the explanation. The MaSF p-values show how far "
               "out they are. Make it measurable: `python -m engine train --from-classifier "
               f"{classifier.id} --dataset NAME` (or the Models page).", icon=":material/warning:")
