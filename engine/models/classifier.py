"""`Classifier`: a sequence classifier with its tokenizer, label names and provenance, exposing the
few operations every measure and metric needs (logits from ids or from word embeddings)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from engine.data import Dataset, Example, score
from engine.errors import InvalidInputError, LabelMismatchError  # noqa: F401 (re-exported)
from engine.models.batch import Batch, collate_examples, tokenize
from engine.models.masking import apply_token_masks, mask_all_primary


class Classifier:
    """A Hugging Face `...ForSequenceClassification` model plus what is needed to use it honestly.

    classes: label names, index = class id. max_length: tokens per input (truncation is flagged).
    metadata: the checkpoint's provenance (dataset, strategy, metrics, code version ...).
    """

    def __init__(self, model, tokenizer, classes: Sequence[str], max_length: int, metadata: dict | None = None,
                 device: torch.device | str = "cpu"):
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.classes = tuple(classes)
        self.max_length = int(max_length)
        self.metadata = dict(metadata or {})
        self.device = torch.device(device)
        self.folder = None  # the checkpoint folder once saved or when loaded from one
        if tokenizer.mask_token_id is None:
            raise InvalidInputError("the tokenizer has no [MASK] token: masking-based measures need one")
        if model.config.num_labels != len(self.classes):
            raise LabelMismatchError(
                f"the model has {model.config.num_labels} outputs but {len(self.classes)} class names were given"
            )

    @property
    def id(self) -> str:
        return self.metadata.get("id", "unsaved")

    @property
    def mask_token_id(self) -> int:
        return int(self.tokenizer.mask_token_id)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def embedding_matrix(self) -> torch.Tensor:
        """E [V, H]: the word-embedding table."""
        return self.model.get_input_embeddings().weight

    def check_dataset(self, dataset: Dataset) -> None:
        """Refuse a dataset whose label set differs from the one this checkpoint was trained on."""
        if tuple(dataset.classes) != self.classes:
            raise LabelMismatchError(
                f"dataset {dataset.name!r} has classes {list(dataset.classes)} but model {self.id!r} "
                f"was trained on {list(self.classes)}"
            )

    def check_target(self, target: int) -> int:
        if not 0 <= int(target) < self.num_classes:
            raise InvalidInputError(f"target class {target} is out of range: this model has classes 0..{self.num_classes - 1} ({', '.join(self.classes)})")
        return int(target)

    def check_targets(self, target, n: int) -> torch.Tensor:
        """The explained class of each of `n` inputs as a long tensor [n] on the model's device: `target` is one
        class for all inputs or one per input; every class is checked against the model's (the one place
        targets are resolved, so every caller gets the same error for the same mistake)."""
        t = torch.as_tensor(target, dtype=torch.long).reshape(-1)
        if t.numel() == 1 and n != 1:
            t = t.expand(n)
        if t.numel() != n:
            raise InvalidInputError(f"{n} inputs but {t.numel()} targets")
        for v in t.tolist():
            self.check_target(v)
        return t.to(self.device).clone()

    # -- tokenisation -------------------------------------------------------------------------
    def batch(self, primary, auxiliary=None, target=None) -> Batch:
        return tokenize(self.tokenizer, primary, auxiliary, target, self.max_length).to(self.device)

    def batch_of(self, examples: Sequence[Example]) -> Batch:
        return collate_examples(self.tokenizer, list(examples), self.max_length).to(self.device)

    # -- forward ------------------------------------------------------------------------------
    def maskable_tokens(self, batch: Batch, row: int = 0) -> list[str]:
        """The word pieces at row `row`'s maskable positions, in text order: what every score vector over
        maskable tokens (`Importance.token_scores`) is aligned to."""
        ids = batch.input_ids[row].cpu()[batch.maskable[row].cpu()].tolist()
        return self.tokenizer.convert_ids_to_tokens(ids)

    def logits(self, batch: Batch, input_ids: torch.Tensor | None = None) -> torch.Tensor:
        """[B, C] logits for the batch (optionally with other ids, e.g. masked copies)."""
        return self.model(
            input_ids=batch.input_ids if input_ids is None else input_ids,
            attention_mask=batch.attention_mask,
            token_type_ids=batch.token_type_ids,
        ).logits

    def word_embeddings(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[B, T, H] word embeddings only (no position/type embeddings)."""
        return self.model.get_input_embeddings()(input_ids)

    def logits_from_embeddings(self, inputs_embeds: torch.Tensor, batch: Batch) -> torch.Tensor:
        """[B, C] logits from word embeddings [B, T, H]; position and type embeddings are added by
        the model as usual, so scaling `inputs_embeds` scales only the word part (as IG requires)."""
        return self.model(
            inputs_embeds=inputs_embeds, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids
        ).logits

    @torch.no_grad()
    def predict_logits(self, batch: Batch, batch_size: int = 64) -> torch.Tensor:
        return torch.cat([self.logits(batch.select(range(i, min(i + batch_size, len(batch)))))
                          for i in range(0, len(batch), batch_size)])

    # -- evaluation ---------------------------------------------------------------------------
    @torch.no_grad()
    def predict_examples(self, examples: Sequence[Example], batch_size: int = 64, mask_all: bool = False,
                         progress=None, token_masks: dict | None = None) -> np.ndarray:
        """Class probabilities [N, C] for dataset examples; `mask_all` masks every primary token,
        `token_masks` (uid -> token positions) masks recorded positions (ROAR's masked data).

        Examples are sorted by length into batches so padding stays small (IMDB reviews vary 10x)."""
        was_training = self.model.training
        self.model.eval()
        order = np.argsort([len(e.primary) + len(e.auxiliary or "") for e in examples], kind="stable")
        probs = np.zeros((len(examples), self.num_classes), dtype=np.float32)
        for start in range(0, len(examples), batch_size):
            idx = order[start : start + batch_size]
            rows = [examples[i] for i in idx]
            batch = apply_token_masks(self.batch_of(rows), [e.uid for e in rows], token_masks, self.mask_token_id)
            if mask_all:
                batch = mask_all_primary(batch, self.mask_token_id)
            probs[idx] = torch.softmax(self.logits(batch).float(), -1).cpu().numpy()
            if progress is not None:
                progress(min(start + batch_size, len(examples)), len(examples))
        self.model.train(was_training)
        return probs

    def evaluate(self, dataset: Dataset, split: str = "test", mask_all: bool = False, batch_size: int = 64,
                 limit: int | None = None, token_masks: dict | None = None) -> dict:
        """The dataset metric (and accuracy) on a split, unmasked or 100%-masked."""
        self.check_dataset(dataset)
        examples = dataset.split(split)[:limit]
        probs = self.predict_examples(examples, batch_size=batch_size, mask_all=mask_all, token_masks=token_masks)
        y_true = np.array([e.label for e in examples])
        y_pred = probs.argmax(-1)
        return {
            "metric": dataset.metric,
            "value": score(dataset.metric, y_true, y_pred, self.num_classes),
            "accuracy": score("accuracy", y_true, y_pred, self.num_classes),
            "n": len(examples),
            "n_correct": int((y_true == y_pred).sum()),
        }
