"""Models: what is in models_cache, with metrics and training curves; build a new one with progress."""
from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from app.admin import require_admin
from app.figure_export import chart
from app.figure_export import table as table_view
from app.progress import ThrottledProgress
from app.shared import PENDING_MODEL_KEY, usable_checkpoints
from app.text import md
from engine.data import dataset_names
from engine.errors import EngineError
from engine.models import PACKAGED_ENCODERS, TrainConfig, default_model_id, list_checkpoints, save_classifier, train_classifier
from engine.models.training import default_learning_rate

require_admin()  # served to a network, only the admin may use this page (app/admin.py)

st.title("Models")

checkpoints = list_checkpoints()
rows = checkpoints
if rows:
    # ROAR sweeps and multi-seed benchmarks leave many checkpoints behind: filter by dataset and encoder.
    f1, f2 = st.columns(2)
    datasets = sorted({str(m.get("dataset")) for m in rows})
    encoders = sorted({str(m.get("base_model")) for m in rows})
    shown_datasets = f1.multiselect("Datasets", datasets, default=datasets, key="models_datasets")
    shown_encoders = f2.multiselect("Encoders", encoders, default=encoders, key="models_encoders")
    rows = [m for m in rows if str(m.get("dataset")) in shown_datasets and str(m.get("base_model")) in shown_encoders]
if rows:
    table = pd.DataFrame([
        {"id": m["id"], "encoder": m.get("base_model"), "dataset": m.get("dataset"), "strategy": m.get("strategy"),
         "metric": m.get("metric"),
         "test unmasked": m.get("test", {}).get("unmasked"), "test 100% masked": m.get("test", {}).get("masked_100"),
         "class-majority": m.get("test", {}).get("majority_baseline"), "best epoch": m.get("best_epoch"),
         "problem": m.get("error", "")}
        for m in rows
    ])
    table_view(table, "models", key="models_table", hide_index=True)
    chosen = st.selectbox("Details of", [m["id"] for m in rows if "error" not in m])
    meta = next(m for m in rows if m["id"] == chosen)
    history = pd.DataFrame(meta.get("history", []))
    if not history.empty:
        long = history.melt(id_vars="epoch", value_vars=["val_unmasked", "val_masked", "train_loss"], var_name="series")
        chart(px.line(long, x="epoch", y="value", color="series", markers=True,
                      title=f"Training curve of {chosen}").update_xaxes(dtick=1), f"training-{chosen}",
              key="models_training_chart")
    with st.expander("metadata.json"):
        st.json(meta)
elif checkpoints:
    st.info("No checkpoint matches the filters above.")
else:
    st.info("models_cache is empty. Build the default model below: `tiny` masked-fine-tuned on Rotten Tomatoes, about 2 minutes on 2 cores.")

st.subheader("Your own classifier")
st.caption("A Hugging Face sequence-classification folder (save_pretrained: config.json, safetensors weights, tokenizer) "
           "is registered by reference: nothing is copied or written into it. Pickled weights are refused.")
with st.form("register"):
    r1, r2, r3 = st.columns([3, 1, 1])
    path = r1.text_input("Folder", placeholder="/path/to/my-classifier")
    own_id = r2.text_input("Id (optional)")
    replacement = r3.selectbox("Replacement token", ["mask", "pad", "unk"],
                               help="the token masking writes; decoders (GPT-2, Llama) have no mask token")
    declared = st.checkbox("It was masked-fine-tuned with that token")
    register = st.form_submit_button("Register")
if register and path:
    from engine.errors import EngineError
    from engine.models.registry import register_model

    try:
        manifest = register_model(path, own_id or None, replacement=None if replacement == "mask" else replacement,
                                  masked_fine_tuned=declared)
    except EngineError as err:
        st.error(md(err))
    else:
        st.success(f"Registered {md(manifest['id'])} ({md(manifest['architecture'])}, classes {md(', '.join(manifest['classes']))}). "
                   f"Make it measurable: `python -m engine train --from-classifier {manifest['id']} --dataset NAME`.")
        st.session_state[PENDING_MODEL_KEY] = manifest["id"]
        st.button("Use it", key="use_registered")

st.subheader("Build a model")
with st.form("build"):
    c1, c2, c3 = st.columns(3)
    registered = [m.id for m in usable_checkpoints() if m.registered]
    base = c1.selectbox("Start from", list(PACKAGED_ENCODERS) + registered,
                        help="A packaged encoder, or one of your registered classifiers: masked fine-tuning then starts "
                             "from it, keeps its head and label names, and makes its masked inputs in distribution "
                             "(make it measurable). " + "\n".join(f"{k}: {v}" for k, v in PACKAGED_ENCODERS.items()))
    dataset = c2.selectbox("Dataset", [d for d in dataset_names() if d != "toy"])
    strategy = c3.selectbox("Strategy", ["masked", "plain", "only-masking"],
                            help="masked fine-tuning keeps masked inputs in distribution; the others are ablations")
    c4, c5, c6 = st.columns(3)
    epochs = c4.number_input("Epochs", 1, 20, 4 if base == "tiny" else 2)
    lr = c5.number_input("Learning rate", 1e-6, 1e-2, default_learning_rate("from-classifier" if base in registered else base),
                         format="%.0e")
    seed = c6.number_input("Seed", 0, 10_000, 0)
    submitted = st.form_submit_button("Build", type="primary")


def build(base: str, dataset: str, strategy: str, epochs: int, lr: float, seed: int, registered: list[str]) -> None:
    """Train and save the model of the Build form, with progress; a refusal (the id exists, the data does not fit
    the model) is shown and the function returns, so that the rest of the page is still drawn. (Stopping the script
    here once left the prompt editor below undrawn: its fields came back empty on the next interaction.)"""
    own = base in registered  # continue from the user's classifier (python -m engine train --from-classifier)
    config = TrainConfig(base_model="custom" if own else base, from_classifier=base if own else None, dataset=dataset,
                         strategy=strategy, epochs=int(epochs), lr=float(lr), seed=int(seed))
    model_id = default_model_id(config)
    if any(m.id == model_id for m in usable_checkpoints()):
        st.warning(f"{md(model_id)} already exists; choose another seed to build a second one.")
        return
    bar = ThrottledProgress(0.0, text="starting ...")

    def report(event: dict) -> None:
        if event["stage"] == "train":
            bar.update(event["step"] / event["steps"], f"epoch {event['epoch']}/{event['epochs']} · "
                         f"batch {event['step']}/{event['steps']} · loss {event['loss']:.3f}")
        elif event["stage"] == "test":
            bar.update(1.0, "evaluating on the test split ...")

    with st.status(f"Building {md(model_id)} ...", expanded=True) as status:
        try:
            classifier = train_classifier(config, progress=report, show_progress_bar=False)
        except EngineError as err:  # e.g. the data's label names are not the registered model's
            status.update(label=f"{md(model_id)} was not built", state="error")
            st.error(md(err))
            return
        save_classifier(classifier, model_id)
        t = classifier.meta.test
        status.update(label=f"Built {md(model_id)}: test {classifier.meta.metric} {t['unmasked']:.3f} "
                      f"(100% masked {t['masked_100']:.3f})", state="complete")
    # The sidebar's selectbox owns MODEL_KEY; hand the choice to the frame, which applies it before
    # drawing that widget on the next run.
    st.session_state[PENDING_MODEL_KEY] = model_id
    st.button("Use it")


if submitted:
    build(base, dataset, strategy, epochs, lr, seed, registered)

# Prompted language models: the prompt editor (register like `models add FOLDER --prompt SPEC.json`) and masked
# LoRA fine-tuning (like `train --from-classifier ID --lora`); their logic lives in app/.
from app.lora_form import lora_form  # noqa: E402
from app.plant_form import plant_form  # noqa: E402
from app.prompt_editor import prompt_editor  # noqa: E402

st.divider()
prompt_editor()
st.divider()
lora_form()
# A model whose reasons are known: plant a mechanism, then score it on the Report card page.
st.divider()
plant_form()
