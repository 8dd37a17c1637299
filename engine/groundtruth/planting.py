"""Plant a mechanism: build the dataset variant, register it, and fine-tune a model on it with the project's own
training (engine.models.training: masked fine-tuning by default, plain as the control; masked LoRA for a prompted
LM via engine.models.lora_training). The spec goes into the checkpoint's metadata under `planted`.

The variant is written as JSON lines (text, label name, split[, pair]) to `user_dir()/planted/` and registered
like a user's dataset, keeping the base dataset's splits, so every command and page can read it by name.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from engine.data import get_dataset
from engine.errors import CheckpointError, InvalidInputError, NotApplicableError
from engine.groundtruth.mechanisms import PlantSpec, check_words, contains_words, planted_dataset

#: the packaged encoders a new head can be trained on (anything else is a classifier id, a folder or a hub id)
PACKAGED_ENCODERS = ("tiny", "minilm", "bilstm")


def planted_dir() -> Path:
    """Where planted variants' data files live: `user_dir()/planted`."""
    from engine.settings import user_dir

    return user_dir() / "planted"


def register_variant(spec: PlantSpec, overwrite: bool = True, command: str | None = None) -> str:
    """Build the planted variant of `spec.base_dataset`, write it and register it; returns its dataset name.

    The file is rewritten only when missing (the variant is a pure function of the spec, so an existing file with
    the same name holds the same rows).
    """
    from engine.data.user_registry import read_manifest, register_dataset, user_dataset_names

    base = get_dataset(spec.base_dataset, spec.split_seed)
    variant = planted_dataset(spec, base)
    name = variant.name
    folder = planted_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    if not path.is_file():
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            for split in ("train", "validation", "test"):
                for e in variant.split(split):
                    row = {"text": e.primary, "label": variant.classes[e.label], "split": split}
                    if variant.paired:
                        row["pair"] = e.auxiliary or ""
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
        tmp.replace(path)
    if name in user_dataset_names() and read_manifest(name).get("path") == str(path.resolve()):
        return name
    register_dataset(name, path, "text", "label", split_column="split", pair_column="pair" if variant.paired else None,
                     metric=base.metric, overwrite=overwrite, command=command or "engine.groundtruth.plant_model")
    return name


def recipe_counts(spec: PlantSpec) -> dict:
    """Per split: examples, and how many carry every decisive word and every inert word (a check of the recipe);
    with several words also how many carry any of them (`with_any_word`) and each (`with_word`)."""
    variant = planted_dataset(spec, get_dataset(spec.base_dataset, spec.split_seed))
    out = {}
    for split in ("train", "validation", "test"):
        ex = variant.split(split)
        out[split] = {"n": len(ex),
                      "with_decisive_words": sum(bool(spec.decisive_words) and contains_words(e.primary, spec.decisive_words)
                                                 for e in ex),
                      "with_inert_words": sum(bool(spec.inert_words) and contains_words(e.primary, spec.inert_words)
                                              for e in ex)}
        if spec.k > 1:  # several words: how many examples hold at least one, and how many hold each
            out[split]["with_any_word"] = sum(any(contains_words(e.primary, [w]) for w in spec.words) for e in ex)
            out[split]["with_word"] = {w: sum(contains_words(e.primary, [w]) for e in ex) for w in spec.words}
    return out


def _model_kind(model: str) -> str:
    """'encoder' (a new head on a packaged or local encoder), 'classifier' (continue a trained or registered
    classifier), 'prompted' (masked LoRA of a prompted LM); refuses what cannot be fine-tuned, saying why."""
    from engine.models import checkpoint

    if model in PACKAGED_ENCODERS:
        return "encoder"
    try:
        checkpoint.model_folders(model)
    except Exception as err:  # an id that is neither a checkpoint nor registered: maybe an encoder folder/hub id
        from engine.models.encoders import resolve_encoder

        try:
            resolve_encoder(model)
        except Exception:
            raise NotApplicableError(
                f"cannot fine-tune {model!r}: it is not a packaged encoder ({', '.join(PACKAGED_ENCODERS)}), a "
                f"checkpoint in models_cache, a registered model or an encoder folder ({err})") from None
        return "encoder"
    try:
        checkpoint.validate_model(model)
    except Exception as err:
        raise NotApplicableError(f"cannot fine-tune {model!r}: {err}") from None
    from engine.models.catalogue import model_kind
    from engine.models.kinds import ModelKind

    return "prompted" if model_kind(model) is ModelKind.PROMPTED else "classifier"


def _tokenizer_of(model: str, kind: str):
    from transformers import AutoTokenizer

    if kind == "encoder":
        from engine.models.encoders import resolve_encoder

        if model == "bilstm":
            return None  # the BiLSTM's word vocabulary is built from the data: every word is one piece
        return AutoTokenizer.from_pretrained(resolve_encoder(model))
    from engine.models import load_classifier

    return load_classifier(model).tokenizer


def plant_model(spec: PlantSpec, model: str = "tiny", *, strategy: str = "masked", epochs: int | None = None,
                lr: float | None = None, batch_size: int | None = None, train_limit: int | None = None,
                eval_limit: int | None = None, model_id: str | None = None, overwrite: bool = False,
                device: str = "auto", command: str | None = None, progress: Callable[[dict], None] | None = None,
                should_stop: Callable[[], bool] | None = None, show_progress_bar: bool = True, **lora_options):
    """Plant `spec` into `model`: register the variant, fine-tune, save with provenance; returns the Classifier.

    Args:
        spec: the PlantSpec (base data, mechanism, words, rate, q, seed).
        model: a packaged encoder ('tiny', 'minilm', 'bilstm') or local encoder folder (a new head is trained), a
            trained or registered classifier id (fine-tuned further, head and labels kept), or a prompted LM id
            (masked LoRA).
        strategy: 'masked' (default: masking stays in distribution) or 'plain' (the control) or 'only-masking'.
        epochs, lr, batch_size: training hyper-parameters (None: the project's defaults for that model).
        train_limit, eval_limit: use only the first N training / evaluation examples (quick runs).
        model_id: checkpoint id (default: 'planted-<model>-<variant>-<strategy>').
        overwrite: replace an existing checkpoint with the same id.
        device, progress, should_stop, show_progress_bar: as `train_classifier`.
        **lora_options: LoraTrainConfig fields for a prompted LM (lora_r, lora_alpha, test_sample ...).

    Returns:
        The saved Classifier; `metadata['planted']` = {spec fields, 'dataset': variant name, 'recipe': counts}.

    Raises:
        InvalidInputError: a word that is not one piece (says how it tokenises), a rate or q outside (0, 1].
        NotApplicableError: a model that cannot be fine-tuned here.
    """
    from engine.models import TrainConfig, checkpoint, save_classifier, train_classifier
    from engine.models.training import default_learning_rate

    started = time.time()
    kind = _model_kind(model)
    tokenizer = _tokenizer_of(model, kind)
    if tokenizer is not None:
        check_words(spec, tokenizer)
    base = get_dataset(spec.base_dataset, spec.split_seed)
    short = model if model.replace("-", "").replace("_", "").isalnum() else "custom"
    model_id = checkpoint.check_model_id(model_id or f"planted-{short}-{spec.variant_name()}-{strategy}")
    target = checkpoint.models_cache_dir() / model_id
    if target.exists() and not overwrite:
        raise InvalidInputError(f"checkpoint {model_id!r} exists at {target}; pass overwrite (--overwrite) or choose "
                                f"another id")
    name = register_variant(spec, command=command)
    planted = {**spec.to_dict(), "dataset": name, "recipe": recipe_counts(spec), "strategy": strategy,
               "model": model, "model_kind": kind, "command": command}
    if kind == "prompted":
        from engine.models.lora_training import LoraTrainConfig, save_lora_classifier, train_lora

        given = {k: v for k, v in (("lr", lr), ("batch_size", batch_size), ("epochs", epochs)) if v is not None}
        config = LoraTrainConfig(base_model="custom", from_classifier=model, dataset=name, strategy=strategy,
                                 max_length=None, seed=spec.seed, split_seed=spec.split_seed, train_limit=train_limit,
                                 eval_limit=eval_limit, device=device, **given, **lora_options)
        classifier, peft_model = train_lora(config, progress=progress, should_stop=should_stop,
                                            show_progress_bar=show_progress_bar)
        classifier.metadata["id"] = model_id
        classifier.metadata["planted"] = {**planted, "seconds": round(time.time() - started, 1)}
        save_lora_classifier(classifier, peft_model, model_id, overwrite=overwrite)
        return classifier
    if lora_options:
        raise InvalidInputError(f"LoRA options {sorted(lora_options)} apply to prompted language models only; "
                                f"{model!r} is fine-tuned in full")
    from_classifier = model if kind == "classifier" else None
    config = TrainConfig(
        base_model="custom" if from_classifier else model, from_classifier=from_classifier, dataset=name,
        strategy=strategy, epochs=epochs if epochs is not None else 4,
        lr=lr if lr is not None else default_learning_rate("from-classifier" if from_classifier else model),
        batch_size=batch_size or 32, max_length=base.max_length, seed=spec.seed, split_seed=spec.split_seed,
        train_limit=train_limit, eval_limit=eval_limit, device=device)
    try:
        classifier = train_classifier(config, progress=progress, should_stop=should_stop,
                                      show_progress_bar=show_progress_bar)
    except CheckpointError as err:
        raise NotApplicableError(f"cannot fine-tune {model!r}: {err}") from None
    classifier.metadata["id"] = model_id
    classifier.metadata["planted"] = {**planted, "seconds": round(time.time() - started, 1)}
    save_classifier(classifier, model_id, overwrite=overwrite)
    return classifier


def planted_spec(classifier) -> PlantSpec:
    """The PlantSpec a planted checkpoint was trained with (its metadata's `planted`); refuses other models.

    Raises:
        NotApplicableError: the model carries no planted mechanism (says how to plant one).
    """
    meta = classifier.metadata.get("planted") if hasattr(classifier, "metadata") else None
    if not meta:
        raise NotApplicableError(f"model {getattr(classifier, 'id', classifier)!r} has no planted mechanism in its "
                                 f"metadata: plant one first (python -m engine plant --model tiny --mechanism trigger)")
    return PlantSpec.from_dict(meta)
