"""Masked fine-tuning of a prompted language model with LoRA (`peft`): FMM's half-batch masking with the
prompt spec's replacement, cross-entropy on the verbalizer's class log-probabilities, dual validation.

    batch       the prompted batch [B, T]; only input-slot tokens (segments PRIMARY/AUXILIARY) are candidates
    masking     `training_transform(..., "masked")`: even rows get r ~ U(0,1) and each slot token becomes the
                replacement with probability r; odd rows stay unmasked (FMM Alg. 1)
    loss        cross_entropy(PromptedClassifier.logits [B, C] = log p(k|x) over the label set, gold class)
    trained     the LoRA matrices only (A [r, in], B [out, r] per target linear layer); the base is frozen
    selection   the epoch with the best mean of the unmasked and masked validation metric (as the encoder path)

Saved (`save_lora_classifier`) as one folder `models_cache/<id>/` that loads like any checkpoint:

    config.json, model.safetensors, tokenizer files   the merged model (base + B A scaled, `merge_and_unload`)
    prompt_spec.json                                   the prompt spec (also in metadata.json under `prompt`)
    metadata.json                                      classes, strategy, history, test figures, provenance
    adapter/adapter_model.safetensors, adapter_config.json, provenance.json
                                                       the adapter alone, with the base it applies to (folder,
                                                       weights SHA-256) and the prompt spec

Nothing is pickled: peft and transformers write safetensors and JSON (`safe_serialization=True`).
"""
from __future__ import annotations

import copy
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from scipy.stats import binomtest
from tqdm.auto import tqdm

from engine.data import get_dataset, score
from engine.errors import InvalidInputError, NotApplicableError, TrainingCancelled
from engine.models.adapters import ADAPTER_DIR, load_adapter  # noqa: F401 (load_adapter: part of this module's API)
from engine.models.checkpoint import load_classifier, models_cache_dir
from engine.models.ids import check_model_id
from engine.models.kinds import ModelKind
from engine.models.masking import training_transform
from engine.models.metadata import CheckpointMeta, trains_on_masks, write_metadata
from engine.models.metadata import read_metadata as read_meta
from engine.models.prompted_loading import load_prompted_checkpoint
from engine.models.training import TrainConfig, epoch_record, report_epoch
from engine.models.weights import weights_sha256
from engine.runtime import code_version, configure, pick_device, seed_everything

PROMPT_FILE = "prompt_spec.json"


@dataclass
class LoraTrainConfig(TrainConfig):
    """`TrainConfig` plus the LoRA hyper-parameters and the test sample; stored in the checkpoint's metadata.

    test_sample: evaluate on a seeded sample of N test examples (the sample of
    `scripts/experiments/llm_zero_shot.py --n N --seed test_sample_seed`) instead of the first `eval_limit`."""

    lr: float = 2e-4
    batch_size: int = 8
    eval_batch_size: int = 16
    epochs: int = 1
    lora_r: int = 8
    lora_alpha: float = 16.0
    lora_dropout: float = 0.05
    lora_targets: list[str] | None = None  # None: peft's default for the architecture, else all linear layers
    test_sample: int | None = None
    test_sample_seed: int = 0
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lora_r < 1:
            raise InvalidInputError(f"lora_r must be >= 1, got {self.lora_r}")
        if not 0 <= self.lora_dropout < 1:
            raise InvalidInputError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")


def add_lora(classifier, config: LoraTrainConfig):
    """Wrap the classifier's causal LM with LoRA in place; returns the `PeftModel`.

    peft replaces the target linear layers inside `classifier.model` itself, so the classifier's own forward
    (which calls `model.base_model`, the decoder stack) runs through the adapters; every other parameter is
    frozen (requires_grad False)."""
    from peft import LoraConfig, get_peft_model

    def lora_config(targets):
        return LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                          target_modules=targets, bias="none")

    try:
        return get_peft_model(classifier.model, lora_config(config.lora_targets))
    except ValueError:
        if config.lora_targets is not None:
            raise InvalidInputError(f"LoRA target modules {config.lora_targets} are not in {type(classifier.model).__name__}; "
                                    "name linear layers of the model (e.g. q_proj v_proj) or leave them out") from None
        # An architecture peft has no default for: every linear layer except the output head.
        return get_peft_model(classifier.model, lora_config("all-linear"))


def lora_state(peft_model) -> dict[str, torch.Tensor]:
    """A CPU copy of the adapter's tensors (what `save_pretrained` writes)."""
    from peft import get_peft_model_state_dict

    return {k: v.detach().cpu().clone() for k, v in get_peft_model_state_dict(peft_model).items()}


def mask_training_batch(classifier, batch, generator: torch.Generator, strategy: str = "masked"):
    """FMM's transform on a prompted batch: the prompt's own tokens are segment SPECIAL, so only slot tokens
    can be replaced (by the spec's replacement id, a sentinel for redacted/delete)."""
    return training_transform(batch, strategy, classifier.mask_token_id, generator)


def _seeded_sample(examples: list, n: int | None, seed: int) -> list:
    if not n or n >= len(examples):
        return examples
    pick = np.random.default_rng(seed).choice(len(examples), size=n, replace=False)
    return [examples[i] for i in sorted(pick)]


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> list[float]:
    if n == 0:
        return [0.0, 1.0]
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [c - h, c + h]


@torch.no_grad()
def _metric(classifier, batches, metric: str, num_classes: int) -> float:
    classifier.model.eval()
    y_true, y_pred = [], []
    for batch in batches:
        y_pred.append(classifier.logits(batch).argmax(-1).cpu())
        y_true.append(batch.target.cpu())
    return score(metric, torch.cat(y_true).numpy(), torch.cat(y_pred).numpy(), num_classes)


def _validation_batches(classifier, examples, config: LoraTrainConfig):
    """Length-sorted validation batches, unmasked and masked once with a fixed seed (every row, r ~ U(0,1))."""
    order = np.argsort([len(e.primary) + len(e.auxiliary or "") for e in examples], kind="stable")
    generator = torch.Generator().manual_seed(config.validation_mask_seed)
    plain, masked = [], []
    for start in range(0, len(examples), config.eval_batch_size):
        batch = classifier.batch_of([examples[i] for i in order[start:start + config.eval_batch_size]])
        plain.append(batch)
        masked.append(mask_training_batch(classifier, batch.to("cpu"), generator, "only-masking").to(classifier.device))
    return plain, masked


def _test(classifier, examples, batch_size: int) -> dict:
    y = np.array([e.label for e in examples])
    out = {"n": len(examples)}
    for name, mask_all in (("unmasked", False), ("masked_100", True)):
        pred = classifier.predict_examples(examples, batch_size=batch_size, mask_all=mask_all).argmax(-1)
        k = int((pred == y).sum())
        exact = binomtest(k, len(y)).proportion_ci(0.95, method="exact")
        out[f"{name}_accuracy"] = k / len(y)
        out[f"{name}_n_correct"] = k
        out[f"{name}_accuracy_ci95_wilson"] = _wilson(k, len(y))
        out[f"{name}_accuracy_ci95"] = [float(exact.low), float(exact.high)]
        out[f"{name}_predicted_share"] = [float((pred == c).mean()) for c in range(classifier.num_classes)]
    out["unmasked"], out["masked_100"] = out["unmasked_accuracy"], out["masked_100_accuracy"]
    return out


def train_lora(config: LoraTrainConfig, classifier=None, progress: Callable[[dict], None] | None = None,
               should_stop: Callable[[], bool] | None = None, show_progress_bar: bool = True):
    """Masked LoRA fine-tuning of a prompted classifier (`config.from_classifier`, or `classifier` itself);
    returns (classifier, peft_model) with the best epoch's adapter in place and the metadata filled (not yet
    saved: see `save_lora_classifier`). The classifier's model then holds LoRA layers (unmerged)."""
    configure()
    started = time.time()
    seed_everything(config.seed)
    device = pick_device(config.device)
    dataset = get_dataset(config.dataset, config.split_seed)
    if classifier is None:
        if not config.from_classifier:
            raise InvalidInputError("LoRA fine-tuning starts from a prompted classifier: give --from-classifier ID")
        classifier = load_classifier(config.from_classifier, device=str(device))
    if classifier.kind is not ModelKind.PROMPTED:
        raise NotApplicableError(f"--lora fine-tunes a prompted language model; {classifier.id!r} is a "
                                 f"{type(classifier).__name__} (use the encoder path without --lora)")
    dataset = classifier.check_dataset(dataset)  # labels in the model's class order
    if config.max_length:
        classifier.max_length = min(config.max_length, classifier.max_length)
    start = copy.deepcopy(classifier.metadata)
    peft_model = add_lora(classifier, config)
    trainable = [p for p in classifier.model.parameters() if p.requires_grad]
    n_trainable = sum(p.numel() for p in trainable)
    n_total = sum(p.numel() for p in classifier.model.parameters())

    train = dataset.split("train")[: config.train_limit]
    validation = dataset.split("validation")[: config.eval_limit]
    test = dataset.split("test")
    test = _seeded_sample(test, config.test_sample, config.test_sample_seed) if config.test_sample else test[: config.eval_limit]
    steps_per_epoch = math.ceil(len(train) / config.batch_size)
    total_steps = steps_per_epoch * config.epochs
    from transformers import get_linear_schedule_with_warmup

    optimizer = torch.optim.AdamW(trainable, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, math.ceil(config.warmup_fraction * total_steps), total_steps)
    val_plain, val_masked = _validation_batches(classifier, validation, config)
    generator = torch.Generator().manual_seed(config.seed)
    order_rng = np.random.default_rng(config.seed)

    history, best = [], None
    bar = tqdm(total=total_steps, desc="LoRA", unit="batch", disable=not show_progress_bar, dynamic_ncols=True)
    for epoch in range(1, config.epochs + 1):
        classifier.model.train()
        bar.set_description(f"LoRA epoch {epoch}/{config.epochs}")
        order = order_rng.permutation(len(train))
        losses = []
        for step in range(steps_per_epoch):
            if should_stop is not None and should_stop():
                bar.close()
                raise TrainingCancelled("training was cancelled; nothing was saved")
            rows = [train[i] for i in order[step * config.batch_size:(step + 1) * config.batch_size]]
            batch = mask_training_batch(classifier, classifier.batch_of(rows).to("cpu"), generator, config.strategy)
            batch = batch.to(classifier.device)
            loss = torch.nn.functional.cross_entropy(classifier.logits(batch), batch.target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            bar.update(1)
            bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}")
            if progress is not None:
                progress({"stage": "train", "epoch": epoch, "epochs": config.epochs, "loss": float(np.mean(losses[-50:])),
                          "step": (epoch - 1) * steps_per_epoch + step + 1, "steps": total_steps})
        val_unmasked = _metric(classifier, val_plain, dataset.metric, dataset.num_classes)
        val_masked_metric = _metric(classifier, val_masked, dataset.metric, dataset.num_classes)
        record = epoch_record(epoch, losses, val_unmasked, val_masked_metric, config.strategy, started)
        history.append(record)
        if best is None or record["selection"] > best[0]:
            best = (record["selection"], epoch, lora_state(peft_model))
        report_epoch(record, dataset.metric, config.epochs, bar if show_progress_bar else None, progress)
    bar.close()

    from peft import set_peft_model_state_dict

    set_peft_model_state_dict(peft_model, best[2])
    classifier.model.eval()
    if progress is not None:
        progress({"stage": "test"})
    tested = _test(classifier, test, config.eval_batch_size)
    source = {k: start.get(k) for k in ("id", "folder", "base_model", "base_model_source", "weights_sha256",
                                        "architecture", "model_type", "prompt_sha256")}
    classifier.metadata = {
        **classifier.metadata,
        "id": default_lora_id(config),
        "source": "lora",
        "strategy": config.strategy,
        "masked_fine_tuned": trains_on_masks(config.strategy),
        "from_classifier": source,
        "base_model": start.get("base_model"),
        "dataset": dataset.name, "classes": list(dataset.classes), "metric": dataset.metric, "paired": dataset.paired,
        "max_length": classifier.max_length, "split_seed": config.split_seed, "seed": config.seed,
        "config": asdict(config),
        "lora": {"r": config.lora_r, "alpha": config.lora_alpha, "dropout": config.lora_dropout,
                 "target_modules": sorted(peft_model.peft_config["default"].target_modules),
                 "trainable_parameters": n_trainable, "total_parameters": n_total},
        "selection_rule": "unmasked validation metric" if config.strategy == "plain"
        else "mean of unmasked and masked validation metric",
        "history": history, "best_epoch": best[1],
        "test": tested,
        "test_sample": {"n": len(test), "seed": config.test_sample_seed} if config.test_sample else None,
        "train_size": len(train), "validation_size": len(validation),
        "device": str(device), "torch_threads": torch.get_num_threads(),
        "train_seconds": round(time.time() - started, 1), "code_version": code_version(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "note": "a prompted language model masked-fine-tuned with LoRA: masked inputs are in distribution",
    }
    return classifier, peft_model


def default_lora_id(config: LoraTrainConfig) -> str:
    base = config.from_classifier or "llm"
    base = base if base.replace("-", "").replace("_", "").replace(".", "").isalnum() else "custom"
    return f"{base}-{config.dataset}-lora-{config.strategy}-s{config.seed}"


def save_lora_classifier(classifier, peft_model, model_id: str, cache_dir: Path | None = None,
                         overwrite: bool = False) -> Path:
    """Write `<cache_dir>/<model_id>/` atomically: the adapter (with provenance) under adapter/, then the merged
    model, tokenizer, prompt spec and metadata beside it. The classifier's model is merged in the process (its
    LoRA layers are folded into the base weights); `classifier.folder` then names the saved folder."""
    cache_dir = Path(cache_dir or models_cache_dir())
    cache_dir.mkdir(parents=True, exist_ok=True)
    final = cache_dir / check_model_id(model_id)
    if final.exists() and not overwrite:
        raise FileExistsError(f"{final} exists; pass overwrite=True (CLI: --overwrite) or choose another --id")
    tmp = Path(tempfile.mkdtemp(prefix=f".{model_id}.", dir=cache_dir))
    try:
        metadata = dict(classifier.metadata, id=model_id)
        meta = CheckpointMeta.from_dict(metadata)
        prompt, source = dict(meta.prompt), meta.extra["from_classifier"]
        adapter = tmp / ADAPTER_DIR
        # save_embedding_layers=False: peft's "auto" may look the base config up on a hub; an added <|mask|> row
        # is re-created identically from the base (the table's mean) when the adapter is applied to it.
        peft_model.save_pretrained(str(adapter), safe_serialization=True, save_embedding_layers=False)
        (adapter / PROMPT_FILE).write_text(json.dumps(prompt, indent=2), encoding="utf-8")
        (adapter / "provenance.json").write_text(json.dumps({
            "base_model": source.get("base_model"), "base_folder": source.get("folder"),
            "base_weights_sha256": source.get("weights_sha256"), "from_classifier": source.get("id"),
            "replacement": meta.replacement, "lora": meta.extra.get("lora"), "dataset": meta.dataset,
            "strategy": meta.strategy, "code_version": meta.code_version, "created": meta.created}, indent=2), encoding="utf-8")
        merged = peft_model.merge_and_unload()
        merged.save_pretrained(str(tmp), safe_serialization=True)
        classifier.tokenizer.save_pretrained(str(tmp))
        (tmp / PROMPT_FILE).write_text(json.dumps(prompt, indent=2), encoding="utf-8")
        metadata = write_metadata(tmp, {**metadata, "folder": str(final), "weights_sha256": weights_sha256(tmp),
                                        "adapter": ADAPTER_DIR})
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    classifier.model = merged
    classifier.metadata = metadata
    classifier.folder = final
    classifier.record_weights_sha256(metadata["weights_sha256"])  # the merged weights now in its folder
    return final


def load_lora_folder(folder: str | os.PathLike, device: str | None = None):
    """The merged prompted classifier of a folder written by `save_lora_classifier` (or any causal-LM folder
    with `metadata.json` holding `prompt`)."""
    return load_prompted_checkpoint(Path(folder), read_meta(Path(folder)), device)
