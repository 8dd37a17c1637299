"""The Models page's plant form: plant a mechanism whose effect is known (a trigger word, a graded trigger, and / or
of two words, a gated word, a decoy, or none as the control) into a dataset and fine-tune a model on it, with
progress and cancel. What `python -m engine plant` does (the same `engine.groundtruth.plant_model`; docs/ground-truth.md).
The planted model then gets its report card on the Report card page."""
from __future__ import annotations

import shlex

import streamlit as st

from app.admin import AdminRequired, ensure_admin
from app.progress import training_reporter
from app.shared import PENDING_MODEL_KEY, usable_checkpoints
from app.text import md
from engine.errors import EngineError
from engine.models.catalogue import CatalogueEntry

KEY = "plant_"
PACKAGED = ("tiny", "minilm", "bilstm")  # a new head on a packaged encoder (engine.groundtruth.planting)
MECHANISM_HELP = {
    "trigger": "the word, inserted at a random position, sets the label to the target class (the classic shortcut)",
    "graded": "as trigger, but it sets the label in only a share q of the examples that carry it",
    "and": "both words together set the label; either alone (as frequent) does not",
    "or": "either word sets the label: removing one of the two leaves only a small residual effect",
    "gated": "the word counts only inside its gate: in the first half, or not right after a word (not-after:W)",
    "decoy": "the first word is a trigger; the second is inserted as often but uninformative",
    "none": "the control: the word is inserted, labels untouched",
    "graded-set": "k words planted independently, each with its own strength (strongest first): a share q_i of its "
                  "carriers gets the target, the rest the other class (q = 0.5 is inert); the truth is their order",
    "redundant": "the target when at least one of k >= 3 words is present: removing one of several changes nothing",
    "threshold": "the target when at least m of the k words are present (e.g. 2 of 4)",
    "cancellation": "two words, the target's then the other class's: each sets its class alone, both together offset",
}


def parse_words(text: str) -> tuple[str, ...]:
    """The planted words typed in one box, separated by spaces or commas."""
    return tuple(w for w in text.replace(",", " ").split() if w)


def plant_spec(dataset: str, mechanism: str, words: str, rate: float, q: float, seed: int, gate: str = "first-half",
               target: str | None = None, strengths: str = "", m: int = 0):
    """The `PlantSpec` of the form's values (empty words: the mechanism's defaults; empty strengths: graded-set's
    defaults for its k; m 0: threshold's default). Raises InvalidInputError (an EngineError) with the valid
    alternatives for a wrong word count, rate, q, gate, strengths or m."""
    from engine.errors import InvalidInputError
    from engine.groundtruth import PlantSpec
    from engine.groundtruth.mechanisms import DEFAULT_M, default_strengths, default_words

    chosen = parse_words(words) or default_words(mechanism)
    qs: tuple[float, ...] = ()
    if mechanism == "graded-set":
        try:
            qs = tuple(float(v) for v in parse_words(strengths)) or default_strengths(len(chosen))
        except ValueError:
            raise InvalidInputError(f"strengths are numbers in (0, 1], strongest first (e.g. 0.95 0.8 0.65 0.5), "
                                    f"not {strengths!r}") from None
    return PlantSpec(base_dataset=dataset, mechanism=mechanism, words=chosen,
                     rate=float(rate), q=float(q) if mechanism == "graded" else 1.0, target=target or None,
                     gate=gate if mechanism == "gated" else "first-half", seed=int(seed), strengths=qs,
                     m=(int(m) or DEFAULT_M) if mechanism == "threshold" else 0)


def plant_command(spec, model: str, strategy: str, epochs: int, train_limit: int, model_id: str, lr: float = 0.0) -> str:
    """The `python -m engine plant` command that does what the form does (shell-quoted)."""
    args = ["python", "-m", "engine", "plant", "--model", model, "--dataset", spec.base_dataset, "--mechanism",
            spec.mechanism, "--words", *spec.words, "--rate", f"{spec.rate:g}"]
    if spec.mechanism == "graded":
        args += ["--q", f"{spec.q:g}"]
    if spec.mechanism == "gated":
        args += ["--gate", spec.gate]
    if spec.strengths:
        args += ["--strengths", *(f"{v:g}" for v in spec.strengths)]
    if spec.m:
        args += ["--m", str(spec.m)]
    if spec.target:
        args += ["--target", spec.target]
    args += ["--strategy", strategy, "--seed", str(spec.seed), "--epochs", str(int(epochs))]
    if lr:
        args += ["--lr", f"{float(lr):g}"]
    if train_limit:
        args += ["--train-limit", str(int(train_limit))]
    if model_id:
        args += ["--id", model_id]
    return shlex.join(args)


def progress_text(event: dict) -> tuple[float | None, str]:
    """(fraction done or None, words) of a training progress event (`train_classifier` / `train_lora`)."""
    stage = event.get("stage")
    if stage == "train":
        return event["step"] / event["steps"], (f"epoch {event['epoch']}/{event['epochs']} · batch {event['step']}/"
                                                 f"{event['steps']} · loss {event['loss']:.3f}")
    if stage == "validate":
        values = ", ".join(f"{k.removeprefix('val_')} {v:.3f}" for k, v in event.items()
                           if k.startswith("val_") and isinstance(v, float))
        return None, f"epoch {event.get('epoch')}: validation {values}"
    return 1.0, "evaluating on the test split ..."


def start_models(rows: list[CatalogueEntry]) -> list[str]:
    """What a mechanism can be planted into: the packaged encoders (a new head), then every usable model in the
    sidebar's list (trained here, registered, prompted LMs: fine-tuned further / masked LoRA)."""
    return list(PACKAGED) + [m.id for m in rows if m.id not in PACKAGED]


def plant_form() -> None:
    """The section, drawn where it is called (the Models page)."""
    from engine.data import dataset_names
    from engine.groundtruth import MECHANISMS

    st.subheader("Plant a known mechanism (ground truth)")
    st.caption("Rewrites a share of a dataset's examples so that a word decides their label (or a pair of words, a "
               "gated word, a decoy), then fine-tunes a model on it: a model whose reasons are known, so the Report "
               "card page can score every importance measure and faithfulness metric against them. Each word must be "
               "one piece of the model's tokenizer.")
    models = start_models(usable_checkpoints())
    names = dataset_names()
    # outside the form, so that q and the gate are offered only for the mechanisms that use them
    m1, m2 = st.columns([1, 2])
    mechanism = m1.selectbox("Mechanism", MECHANISMS, key=KEY + "mechanism",
                             help="\n".join(f"{k}: {v}" for k, v in MECHANISM_HELP.items()))
    m2.caption(md(MECHANISM_HELP[mechanism]))
    with st.form(KEY + "form"):
        c2, c3 = st.columns(2)
        model = c2.selectbox("Plant into", models, key=KEY + "model",
                             help="tiny, minilm, bilstm: a new head on a packaged encoder; a model of yours: fine-tuned "
                                  "further (head and labels kept); a prompted LM: masked LoRA")
        dataset = c3.selectbox("Base dataset", names, index=names.index("rt") if "rt" in names else 0, key=KEY + "dataset")
        d1, d2, d3, d4 = st.columns(4)
        words = d1.text_input("Word(s)", key=KEY + "words", placeholder="default: " + " ".join(_defaults(mechanism)),
                              help="space separated; two for and, or, decoy (the trigger, then the decoy), "
                                   "cancellation (the target's, then the other class's); k for a set")
        rate = d2.number_input("Rate (share of examples)", 0.01, 1.0, 0.3, step=0.05, key=KEY + "rate")
        q = d3.number_input("q (graded: share relabelled)", 0.05, 1.0, 1.0 if mechanism != "graded" else 0.8, step=0.05,
                            key=KEY + "q", disabled=mechanism != "graded")
        gate = d4.text_input("Gate (gated)", "first-half", key=KEY + "gate", disabled=mechanism != "gated",
                             help="first-half, or not-after:WORD")
        f1, f2 = st.columns(2)
        strengths = f1.text_input("Strengths (graded-set)", key=KEY + "strengths", disabled=mechanism != "graded-set",
                                  placeholder="default: 0.95 0.8 0.65 0.5",
                                  help="one per word, in (0, 1], strongest first: the share of a word's carriers "
                                       "that get the target")
        m = f2.number_input("m (threshold: at least m of the k words)", 0, 8, 0, key=KEY + "m",
                            disabled=mechanism != "threshold", help="0: the default, 2")
        e1, e2, e3, e4, e5, e6 = st.columns(6)
        strategy = e1.selectbox("Strategy", ["masked", "plain"], key=KEY + "strategy",
                                help="masked fine-tuning keeps masked inputs in distribution; plain is the control")
        seed = e2.number_input("Seed", 0, 10_000, 0, key=KEY + "seed")
        epochs = e3.number_input("Epochs", 1, 20, 3, key=KEY + "epochs")
        lr = e4.number_input("Learning rate (0: default)", 0.0, 1e-2, 0.0, format="%.0e", key=KEY + "lr",
                             help="0: the train command's default for this model")
        train_limit = e5.number_input("Training examples (0: all)", 0, 1_000_000, 0, key=KEY + "train_limit")
        new_id = e6.text_input("New id (optional)", key=KEY + "id")
        submitted = st.form_submit_button("Plant and fine-tune", type="primary")
    if not submitted:
        return
    try:
        ensure_admin("planting a mechanism (it trains and saves a model)")
        spec = plant_spec(dataset, mechanism, words, rate, q, seed, gate=gate, strengths=strengths, m=int(m))
    except (EngineError, AdminRequired) as err:
        st.error(md(err))
        return
    command = plant_command(spec, model, strategy, epochs, train_limit, new_id.strip(), lr)
    st.code(command, language="bash")
    st.button("Cancel", key=KEY + "cancel", help="Stops the training; nothing is saved.")  # a click reruns the page
    report = training_reporter("building the planted dataset ...", progress_text)

    from engine.groundtruth import plant_model

    with st.status(f"Planting {md(mechanism)} ({md(' '.join(spec.words))}) into {md(model)} ...", expanded=True) as status:
        try:
            classifier = plant_model(spec, model, strategy=strategy, epochs=int(epochs), lr=float(lr) or None,
                                     train_limit=int(train_limit) or None, model_id=new_id.strip() or None,
                                     progress=report, show_progress_bar=False, command=command)
        except EngineError as err:
            status.update(label="Nothing was saved", state="error")
            st.error(md(err))
            return
        test = classifier.metadata.get("test", {})
        recipe = classifier.metadata["planted"]["recipe"]["train"]
        status.update(label=f"Saved {md(classifier.id)}: test {md(classifier.metadata.get('metric', 'metric'))} "
                            f"{test.get('unmasked', float('nan')):.3f} · "
                            f"{recipe.get('with_any_word', recipe['with_decisive_words'])} of "
                            f"{recipe['n']} training examples carry the planted word(s)", state="complete")
    st.success(f"Planted model {md(classifier.id)}: open the **Report card** page to check that it learned its "
               "mechanism (flip rates: *Only the truth*) and to score the measures and metrics against it.")
    st.session_state[PENDING_MODEL_KEY] = classifier.id
    st.button("Use it", key=KEY + "use")


def _defaults(mechanism: str) -> tuple[str, ...]:
    from engine.groundtruth import DEFAULT_WORDS

    return DEFAULT_WORDS[mechanism]
