"""Fine-tuning a classifier: masked fine-tuning (FMM Alg. 1), plain fine-tuning and only-masking.

Optimiser as in the papers: AdamW, weight decay 0.01 (not on biases and LayerNorm), linear decay
with 6% warm-up, gradient norm clipped at 1. The epoch kept is the best on validation: for `masked`
and `only-masking` the mean metric over an unmasked and a masked copy of the validation split (masked
once with a fixed seed), for `plain` the unmasked metric alone.
"""
from __future__ import annotations

import contextlib
import copy
import math
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np
import torch
from scipy.stats import binomtest
from tqdm.auto import tqdm

from engine.data import Dataset, get_dataset, score
from engine.errors import InvalidInputError, LabelMismatchError, TrainingCancelled  # noqa: F401 (re-exported)
from engine.models.batch import Batch, collate_examples
from engine.models.checkpoint import load_classifier
from engine.models.classifier import Classifier
from engine.models.encoders import resolve_encoder
from engine.models.loading import load_pretrained
from engine.models.masking import apply_token_masks, training_transform
from engine.models.metadata import STRATEGIES, trains_on_masks
from engine.runtime import code_version, configure, pick_device, runtime_record, seed_everything

PRECISIONS = ("fp32", "tf32", "bf16")
#: Steps between reading the loss back to the host on a GPU (each read waits for the GPU to finish).
LOSS_READ_EVERY = 25


@dataclass
class TrainConfig:
    """Everything that decides a training run; stored in the checkpoint's metadata."""

    base_model: str = "tiny"
    dataset: str = "rt"
    strategy: str = "masked"
    epochs: int = 4
    lr: float = 1e-4
    batch_size: int = 32
    weight_decay: float = 0.01
    warmup_fraction: float = 0.06
    max_grad_norm: float = 1.0
    max_length: int | None = None  # None: the dataset's default
    seed: int = 0
    split_seed: int = 0
    train_limit: int | None = None  # use only the first N training examples (quick runs, tests)
    eval_limit: int | None = None  # use only the first N validation/test examples
    eval_batch_size: int = 64
    validation_mask_seed: int = 1234
    device: str = "auto"
    attention: str = "additive"  # bilstm only: "uniform" freezes attention to 1/n (W&P's baseline)
    from_classifier: str | None = None  # start from this classifier (id or folder), head and label names kept
    # fp32 (default, bit-identical to earlier runs); tf32: TF32 tensor-core matmuls on CUDA (10-bit mantissa
    # products, fp32 accumulation); bf16: bfloat16 autocast of the forward and loss (weights and optimiser fp32).
    precision: str = "fp32"
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise InvalidInputError(f"unknown strategy {self.strategy!r}; use one of {', '.join(STRATEGIES)}")
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise InvalidInputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise InvalidInputError(f"lr must be > 0, got {self.lr}")
        if self.attention not in ("additive", "uniform"):
            raise InvalidInputError(f"attention must be additive or uniform, got {self.attention!r}")
        if self.attention != "additive" and self.base_model != "bilstm":
            raise InvalidInputError("frozen uniform attention is a BiLSTM option (--model bilstm)")
        if not 0 <= self.warmup_fraction < 1:
            raise InvalidInputError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}")
        if self.precision not in PRECISIONS:
            raise InvalidInputError(f"unknown precision {self.precision!r}; use one of {', '.join(PRECISIONS)}")


def default_model_id(config: TrainConfig) -> str:
    base = config.from_classifier or config.base_model
    stripped = base.replace("-", "").replace("_", "").replace(".", "")
    base = base if stripped.isascii() and stripped.isalnum() else "custom"  # an id is ASCII (check_model_id)
    return f"{base}-{config.dataset}-{config.strategy}-s{config.seed}"


def _is_default_label(name: str, index: int) -> bool:
    return name == f"LABEL_{index}"


def _start_from_classifier(config: TrainConfig, dataset: Dataset, device: torch.device) -> Classifier:
    """The user's classifier, to be fine-tuned further with its own head and label names. The dataset's labels
    are matched to its classes by name (`Classifier.check_dataset`; the caller trains on the dataset so
    aligned). A head named only by transformers' defaults LABEL_0.. carries no names to match, so it takes
    the dataset's names by index (recorded as `label_names_replaced`), provided the counts agree."""
    classifier = load_classifier(config.from_classifier, device=str(device), dtype="float32")  # trained in float32
    source = dict(classifier.metadata)
    renamed = None
    defaults = all(_is_default_label(c, i) for i, c in enumerate(classifier.classes))
    numbered = all(re.fullmatch(r"-?\d+", c.strip()) for c in dataset.classes)
    if defaults and not numbered and tuple(classifier.classes) != tuple(dataset.classes):
        if classifier.num_classes != dataset.num_classes:
            raise LabelMismatchError(f"model {config.from_classifier!r} has {classifier.num_classes} unnamed classes "
                                     f"{list(classifier.classes)} but dataset {dataset.name!r} has {dataset.num_classes} "
                                     f"{list(dataset.classes)}")
        renamed = list(classifier.classes)
        classifier.classes = tuple(dataset.classes)
    else:
        classifier.check_dataset(dataset)  # refuses a real mismatch of names, naming both lists
    # Validation and test mask inputs whatever the strategy: a model without a replacement token cannot be
    # trained here (NotApplicableError says how to choose one).
    _ = classifier.mask_token_id
    classifier.max_length = min(config.max_length or dataset.max_length, classifier.max_length)
    classifier.metadata = {"from_classifier": {
        "id": source.get("id"), "folder": source.get("folder") or (str(classifier.folder) if classifier.folder else None),
        "weights_sha256": source.get("weights_sha256") or classifier.weights_sha256,
        "architecture": source.get("architecture"), "strategy": source.get("strategy"),
        "masked_fine_tuned": classifier.masked_fine_tuned, "label_names_replaced": renamed},
        "replacement_token": source.get("replacement_token"), "replacement_token_id": classifier.replacement_token_id}
    return classifier


def permute_labels(train, validation, seed: int) -> tuple[list, list]:
    """The training and validation examples with their labels permuted (one seeded permutation per split): the
    class balance stays, the link between text and label is gone."""
    import dataclasses

    rng = np.random.default_rng(seed)
    out = []
    for examples in (train, validation):
        labels = rng.permutation([e.label for e in examples])
        out.append([dataclasses.replace(e, label=int(y)) for e, y in zip(examples, labels)])
    return out[0], out[1]


def untrained_classifier(config: TrainConfig, dataset: Dataset, device: torch.device) -> Classifier:
    """The classifier training with `config` starts from, on `device`: the base model (or the classifier it continues
    from, or a fresh BiLSTM) with a new head for `dataset`'s classes, initialised from torch's global generator
    (training seeds it first). Also the architecture a stored fine-tuning's weights load back into (tests/conftest.py)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if config.from_classifier:
        return _start_from_classifier(config, dataset, device)

    if config.base_model == "bilstm":
        from engine.models.bilstm import new_bilstm

        train = dataset.split("train")[: config.train_limit]
        texts = [e.primary + (" " + e.auxiliary if e.auxiliary else "") for e in train]
        model, tokenizer = new_bilstm(texts, dataset.num_classes, dataset.classes, dataset.paired, seed=config.seed,
                                      attention=config.attention)
        return Classifier(model, tokenizer, dataset.classes, config.max_length or dataset.max_length, {}, device)
    source = resolve_encoder(config.base_model)
    # Weights from safetensors only (a folder with a pickled pytorch_model.bin is refused), trained in float32
    # whatever the stored dtype; attention as the settings ask (SDPA where the architecture has it).
    model, runtime = load_pretrained(
        AutoModelForSequenceClassification, source, device=device, dtype="float32",
        num_labels=dataset.num_classes,
        id2label=dict(enumerate(dataset.classes)),
        label2id={c: i for i, c in enumerate(dataset.classes)},
    )
    tokenizer = AutoTokenizer.from_pretrained(source)
    max_length = min(config.max_length or dataset.max_length, model.config.max_position_embeddings)
    classifier = Classifier(model, tokenizer, dataset.classes, max_length, {}, device)
    classifier.load_runtime = runtime
    return classifier


def _optimizer(model: torch.nn.Module, config: TrainConfig, total_steps: int):
    from transformers import get_linear_schedule_with_warmup

    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if param.ndim < 2 or "LayerNorm" in name or "bias" in name else decay).append(param)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
    )
    scheduler = get_linear_schedule_with_warmup(optimizer, math.ceil(config.warmup_fraction * total_steps), total_steps)
    return optimizer, scheduler


def _validation_batches(classifier: Classifier, examples, config: TrainConfig, token_masks=None):
    """Length-sorted validation batches, unmasked and masked once with a fixed seed (as in training)."""
    order = np.argsort([len(e.primary) + len(e.auxiliary or "") for e in examples], kind="stable")
    generator = torch.Generator().manual_seed(config.validation_mask_seed)
    plain, masked = [], []
    for start in range(0, len(examples), config.eval_batch_size):
        rows = [examples[i] for i in order[start : start + config.eval_batch_size]]
        batch = collate_examples(classifier.tokenizer, rows, classifier.max_length)
        batch = apply_token_masks(batch, [e.uid for e in rows], token_masks, classifier.mask_token_id)
        plain.append(batch.to(classifier.device))
        masked.append(training_transform(batch, "only-masking", classifier.mask_token_id, generator).to(classifier.device))
    return plain, masked


def _tokenised_rows(classifier: Classifier, examples, chunk: int = 1024) -> list[Batch]:
    """Every example tokenised once, before the step loop: one unpadded single-row `Batch` each (a row's
    tokens do not depend on the other rows of its batch, so `_collate` of rows equals tokenising them together)."""
    rows = []
    for start in range(0, len(examples), chunk):
        part = examples[start:start + chunk]
        batch = collate_examples(classifier.tokenizer, part, classifier.max_length)
        lengths = batch.attention_mask.sum(1).tolist()
        for i, n in enumerate(lengths):
            one = batch.select([i])
            rows.append(replace(one, input_ids=one.input_ids[:, :n], attention_mask=one.attention_mask[:, :n],
                                token_type_ids=one.token_type_ids[:, :n], segments=one.segments[:, :n],
                                maskable=one.maskable[:, :n], offsets=[one.offsets[0][:n]]))
    return rows


def _collate(rows: list[Batch], pad_id: int) -> Batch:
    """Pretokenised single rows padded (right) into one batch, exactly as `collate_examples` pads them."""
    def stack(name: str, value) -> torch.Tensor:
        return torch.nn.utils.rnn.pad_sequence([getattr(r, name)[0] for r in rows], batch_first=True, padding_value=value)

    T = max(r.input_ids.shape[1] for r in rows)
    return Batch(input_ids=stack("input_ids", pad_id), attention_mask=stack("attention_mask", 0),
                 token_type_ids=stack("token_type_ids", 0), segments=stack("segments", 0),
                 maskable=stack("maskable", False), target=torch.cat([r.target for r in rows]),
                 truncated=torch.cat([r.truncated for r in rows]),
                 offsets=[r.offsets[0] + [(0, 0)] * (T - len(r.offsets[0])) for r in rows])


def _to_device(batch: Batch, device: torch.device) -> Batch:
    """The batch on `device`; to a GPU from pinned host memory without waiting for the copy."""
    if device.type != "cuda":
        return batch.to(device)
    moved = {f.name: getattr(batch, f.name).pin_memory().to(device, non_blocking=True)
             for f in fields(batch) if isinstance(getattr(batch, f.name), torch.Tensor)}
    return replace(batch, **moved)


@contextlib.contextmanager
def _precision(precision: str, device: torch.device):
    """TF32 matmuls (restored afterwards) or bfloat16 autocast for the training steps; fp32 changes nothing."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    if precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


@torch.no_grad()
def _metric_on_batches(classifier: Classifier, batches, dataset: Dataset) -> float:
    classifier.model.eval()
    y_true, y_pred = [], []
    for batch in batches:
        y_pred.append(classifier.logits(batch).argmax(-1).cpu())
        y_true.append(batch.target.cpu())
    return score(dataset.metric, torch.cat(y_true).numpy(), torch.cat(y_pred).numpy(), dataset.num_classes)


def epoch_record(epoch: int, losses: list[float], val_unmasked: float, val_masked: float, strategy: str,
                 started: float) -> dict:
    """One epoch's line of the training history (shared by full and LoRA fine-tuning).

    Args:
        epoch: 1-based epoch number.
        losses: the epoch's training losses (one per step).
        val_unmasked, val_masked: the validation metric on plain and on masked inputs.
        strategy: the training strategy; `plain` selects on the unmasked metric alone, every other strategy on
            the mean of the two (dual validation).
        started: `time.time()` when training started.

    Returns:
        {"epoch", "train_loss", "val_unmasked", "val_masked", "selection", "elapsed_s" (seconds since start)}.
    """
    selection = val_unmasked if strategy == "plain" else (val_unmasked + val_masked) / 2
    return {"epoch": epoch, "train_loss": float(np.mean(losses)), "val_unmasked": val_unmasked,
            "val_masked": val_masked, "selection": selection, "elapsed_s": round(time.time() - started, 1)}


def report_epoch(record: dict, metric: str, epochs: int, bar=None,
                 progress: Callable[[dict], None] | None = None) -> None:
    """Show an epoch's record: a line above the progress bar `bar` (if given) and a `validate` event for the
    page's `progress` callback (if given)."""
    if bar is not None:
        bar.write(f"epoch {record['epoch']}: train loss {record['train_loss']:.4f}  validation {metric} unmasked "
                  f"{record['val_unmasked']:.4f}  masked {record['val_masked']:.4f}  "
                  f"(selection {record['selection']:.4f})")
    if progress is not None:
        progress({"stage": "validate", **record, "epochs": epochs})


def train_classifier(
    config: TrainConfig,
    progress: Callable[[dict], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    show_progress_bar: bool = True,
    token_masks: dict | None = None,
) -> Classifier:
    """Fine-tune `config.base_model` on `config.dataset`; returns the best-epoch classifier with its
    metadata (not yet saved: see `checkpoint.save_classifier`).

    progress: called with event dicts ({'stage': 'train'|'validate'|'test', ...}) for UIs.
    should_stop: polled every step; when it returns True, TrainingCancelled is raised and nothing is kept.
    token_masks: uid -> token positions masked in every split before anything else (ROAR's retraining on
        masked data); the masked-fine-tuning transform then applies on top.

    Args:
        config: what to train (base model, dataset, strategy from STRATEGIES, seeds, epochs, ...).
        progress, should_stop, token_masks: as above; show_progress_bar: a tqdm bar on the terminal.

    Returns:
        The Classifier at its best epoch; `metadata` holds the config, history and test figures
        (`classifier.meta` types them).
    """
    configure()
    started = time.time()
    seed_everything(config.seed)
    device = pick_device(config.device)
    dataset = get_dataset(config.dataset, config.split_seed)
    classifier = untrained_classifier(config, dataset, device)
    # Labels in the model's class order (a classifier started from keeps its head; a new head is the dataset's).
    dataset = classifier.check_dataset(dataset)
    start = dict(classifier.metadata)  # provenance of a classifier we start from (empty otherwise)
    model = classifier.model

    train = dataset.split("train")[: config.train_limit]
    validation = dataset.split("validation")[: config.eval_limit]
    test = dataset.split("test")[: config.eval_limit]
    if config.extra.get("label_permutation_seed") is not None:
        # The label-randomisation sanity check (engine/sanity/labels.py): train and select on labels permuted once.
        train, validation = permute_labels(train, validation, int(config.extra["label_permutation_seed"]))
    steps_per_epoch = math.ceil(len(train) / config.batch_size)
    total_steps = steps_per_epoch * config.epochs
    optimizer, scheduler = _optimizer(model, config, total_steps)
    val_plain, val_masked = _validation_batches(classifier, validation, config, token_masks)
    generator = torch.Generator().manual_seed(config.seed)
    order_rng = np.random.default_rng(config.seed)
    tokenised = _tokenised_rows(classifier, train)  # once, not per step and epoch
    pad_id = classifier.tokenizer.pad_token_id if classifier.tokenizer.pad_token_id is not None else 0
    # Reading the loss makes the host wait for the GPU: there, only every LOSS_READ_EVERY steps (a CPU has no wait).
    read_every = 1 if device.type == "cpu" else LOSS_READ_EVERY

    history, best = [], None
    bar = tqdm(total=total_steps, desc="training", unit="batch", disable=not show_progress_bar, dynamic_ncols=True)
    for epoch in range(1, config.epochs + 1):
        model.train()
        bar.set_description(f"epoch {epoch}/{config.epochs}")
        order = order_rng.permutation(len(train))
        losses: list[float] = []
        pending: list[torch.Tensor] = []  # losses of the steps since the last read, on the device
        for step in range(steps_per_epoch):
            if should_stop is not None and should_stop():
                bar.close()
                raise TrainingCancelled("training was cancelled; nothing was saved")
            picked = order[step * config.batch_size : (step + 1) * config.batch_size]
            rows = [train[i] for i in picked]
            batch = _collate([tokenised[i] for i in picked], pad_id)
            batch = apply_token_masks(batch, [e.uid for e in rows], token_masks, classifier.mask_token_id)
            batch = _to_device(training_transform(batch, config.strategy, classifier.mask_token_id, generator), device)
            with _precision(config.precision, device):
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=config.precision == "bf16"):
                    logits = classifier.logits(batch)
                loss = torch.nn.functional.cross_entropy(logits.float(), batch.target)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                optimizer.step()
            scheduler.step()
            pending.append(loss.detach())
            bar.update(1)
            if len(pending) >= read_every or step == steps_per_epoch - 1:
                losses.extend(torch.stack(pending).cpu().tolist())
                pending = []
                bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}")
                if progress is not None:
                    progress({"stage": "train", "epoch": epoch, "epochs": config.epochs,
                              "step": (epoch - 1) * steps_per_epoch + step + 1, "steps": total_steps,
                              "loss": float(np.mean(losses[-50:]))})
        val_unmasked = _metric_on_batches(classifier, val_plain, dataset)
        val_masked_metric = _metric_on_batches(classifier, val_masked, dataset)
        record = epoch_record(epoch, losses, val_unmasked, val_masked_metric, config.strategy, started)
        history.append(record)
        if best is None or record["selection"] > best[0]:
            best = (record["selection"], epoch,
                    copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()}))
        report_epoch(record, dataset.metric, config.epochs, bar if show_progress_bar else None, progress)
    bar.close()

    model.load_state_dict(best[2])
    model.eval()
    if progress is not None:
        progress({"stage": "test"})
    unmasked = classifier.evaluate(dataset, "test", limit=config.eval_limit, token_masks=token_masks)
    masked_all = classifier.evaluate(dataset, "test", mask_all=True, limit=config.eval_limit)
    ci = binomtest(masked_all["n_correct"], masked_all["n"]).proportion_ci(0.95, method="exact")
    majority = float(dataset.majority_baseline("test")) if config.eval_limit is None else score(
        dataset.metric, np.array([e.label for e in test]), np.full(len(test), dataset.majority_class()), dataset.num_classes)
    classifier.metadata = {
        **start,
        "id": default_model_id(config),
        "base_model": config.from_classifier or config.base_model,
        "base_model_source": start["from_classifier"]["folder"] if config.from_classifier else resolve_encoder(config.base_model),
        "masked_fine_tuned": trains_on_masks(config.strategy),
        "architecture": getattr(classifier.model.config, "architecture", None) or classifier.model.config.model_type,
        "dataset": dataset.name,
        "classes": list(dataset.classes),
        # set when the dataset numbers its classes in another order than the model's head: {its class: model's}
        "dataset_label_mapping": (dataset.extra or {}).get("label_mapping"),
        "metric": dataset.metric,
        "paired": dataset.paired,
        "strategy": config.strategy,
        "max_length": classifier.max_length,
        "split_seed": config.split_seed,
        "seed": config.seed,
        "config": asdict(config),
        "selection_rule": "unmasked validation metric" if config.strategy == "plain"
        else "mean of unmasked and masked validation metric",
        "history": history,
        "best_epoch": best[1],
        "test": {
            "n": unmasked["n"],
            "unmasked": unmasked["value"],
            "unmasked_accuracy": unmasked["accuracy"],
            "masked_100": masked_all["value"],
            "masked_100_accuracy": masked_all["accuracy"],
            "masked_100_accuracy_ci95": [float(ci.low), float(ci.high)],
            "majority_baseline": majority,
        },
        "train_size": len(train),
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "precision": config.precision,
        # GPU name, versions, determinism flags; and the dtype and attention kernel the training ran with
        "runtime": {**runtime_record(device), **classifier.runtime},
        "train_seconds": round(time.time() - started, 1),
        "code_version": code_version(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return classifier


def default_learning_rate(base_model: str) -> float:
    """The peak learning rate used when none is given: 1e-3 for the BiLSTM trained from scratch, 2e-5 for
    masked fine-tuning that continues from a user's classifier ("from-classifier": it is already fine-tuned,
    the papers' value, docs/methods.md#masked-fine-tuning), 1e-4 for a pretrained encoder (suits `tiny`; the papers use
    2e-5..5e-5 for larger ones)."""
    return {"bilstm": 1e-3, "from-classifier": 2e-5}.get(base_model, 1e-4)
