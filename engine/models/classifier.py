"""`Classifier`: a sequence classifier with its tokenizer, label names and provenance, exposing the
few operations every measure and metric needs (logits from ids or from word embeddings)."""
from __future__ import annotations

import hashlib
import inspect
import numbers
import re
import threading
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from engine.data import Dataset, Example, score
from engine.data.labels import align_to_classes, label_key
from engine.errors import InvalidInputError, LabelMismatchError, NotApplicableError  # noqa: F401 (re-exported)
from engine.models.batch import Batch, collate_examples, tokenize
from engine.models.kinds import BILSTM_ARCHITECTURE, ModelKind
from engine.models.loading import dtype_name
from engine.models.masking import apply_token_masks, mask_all_primary
from engine.models.metadata import CheckpointMeta


@dataclass
class ForwardOutput:
    """What `Classifier.forward` returns: logits [B, C]; attentions (L x [B, heads, T, T]) and hidden states
    ((L+1) x [B, T, H]) when asked for, else None."""

    logits: torch.Tensor
    attentions: tuple | None = None
    hidden_states: tuple | None = None


def is_decoder_classifier(model) -> bool:
    """A decoder (GPT-2, Llama-style) `*ForSequenceClassification`: its head is a linear `score` applied to
    every position and read at the last token. Every such class in transformers names its head `score`;
    encoder classifiers name theirs `classifier` and read position 0 ([CLS] / <s>)."""
    return isinstance(getattr(model, "score", None), torch.nn.Linear) and hasattr(model, "base_model")


def uses_token_types(model) -> bool:
    """Whether the model reads `token_type_ids`: its forward takes them and it has more than one type.

    DistilBERT and Llama take none; RoBERTa/XLM-R (type_vocab_size 1) and DeBERTa-v3 (0) would only add a
    constant (or fail on type 1 of a paired input); GPT-2 would look them up in its *word* embeddings.
    When the forward's signature cannot be inspected (a compiled or wrapped forward), the configuration
    decides: dropping the types of a model that reads them would silently change a paired input's logits,
    so they are kept unless the configuration says there is at most one type (a forward that takes none
    then fails loudly, naming the argument)."""
    if is_decoder_classifier(model):
        return False
    types = getattr(getattr(model, "config", None), "type_vocab_size", None)
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return types is None or int(types) > 1
    if "token_type_ids" not in params:
        return False
    return types is None or int(types) > 1


def model_device(model) -> torch.device:
    """Where the model's weights are: the device of its first parameter (or buffer); the CPU when it has none."""
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return torch.device("cpu")


def attention_implementation(model) -> str | None:
    """The attention kernel a transformers model runs ('eager', 'sdpa', ...); None for other modules (the BiLSTM)."""
    config = getattr(model, "config", None)
    return getattr(config, "_attn_implementation", None) if hasattr(model, "set_attn_implementation") else None


class Classifier:
    """A Hugging Face `...ForSequenceClassification` model plus what is needed to use it honestly.

    classes: label names, index = class id. max_length: tokens per input (truncation is flagged).
    device: where the model runs and every batch goes; default: where the model's parameters already are
        (`model_device`; the CPU for a model without parameters).
    metadata: the checkpoint's provenance (dataset, strategy, metrics, code version ...); for a model
        fine-tuned elsewhere also `masked_fine_tuned` (False) and the chosen `replacement_token(_id)`.

    Every forward goes through `forward` (or `logits`, `logits_from_embeddings`), which hides what differs
    between families: token type ids only where the model reads them, and for decoder classifiers the
    logits read at each row's last real token (from the attention mask, so a replacement token equal to
    the pad token, or `inputs_embeds`, never moves the read-out position).

    The replacement token that masking writes (`mask_token_id`) is the tokenizer's mask token, unless the
    metadata names another (`replacement_token_id`, e.g. pad or unk of a decoder that has no mask token).
    """

    def __init__(self, model, tokenizer, classes: Sequence[str], max_length: int, metadata: dict | None = None,
                 device: torch.device | str | None = None):
        # No device given: the model stays where its weights are (a model already on the GPU is not copied back
        # to the CPU, which would leave the caller's CUDA batches and this classifier on different devices).
        device = model_device(model) if device is None else torch.device(device)
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.classes = tuple(classes)
        self.max_length = int(max_length)
        self.metadata = dict(metadata or {})
        self.device = device
        self.folder = None  # the checkpoint folder once saved or when loaded from one
        self.decoder = is_decoder_classifier(model)
        self._token_types = uses_token_types(model)
        self.load_runtime: dict | None = None  # what engine.models.loading chose (dtype, attention) and why
        self._attention_default = attention_implementation(model)
        self._attention_lock = threading.Lock()
        if model.config.num_labels != len(self.classes):
            raise LabelMismatchError(
                f"the model has {model.config.num_labels} outputs but {len(self.classes)} class names were given"
            )

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_attention_lock", None)  # a lock cannot be pickled or deep-copied; each copy gets its own
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._attention_lock = threading.Lock()

    @property
    def meta(self) -> CheckpointMeta:
        """The metadata, typed (`engine.models.metadata.CheckpointMeta`): a snapshot of `metadata` as it is now."""
        return CheckpointMeta.from_dict(self.metadata)

    @property
    def weights_sha256(self) -> str | None:
        """SHA-256 (hex) of the weights this classifier runs, its identity in every result and key: what its loader
        recorded (`record_weights_sha256`: a folder fine-tuned elsewhere, a prompted LM, a base with a shipped
        adapter merged in, whose hash covers both), else the hash of its folder's safetensors files (read now,
        `engine.models.weights.weights_sha256`), else None (built in memory, never saved: `parameters_sha256`)."""
        recorded = self.__dict__.get("_weights_sha256")
        if recorded is not None:
            return recorded
        if self.folder is None:
            return None
        from engine.models.weights import weights_sha256

        return weights_sha256(self.folder)

    def record_weights_sha256(self, digest: str | None) -> None:
        """Set what `weights_sha256` answers: for a loader that hashed the files already, or whose model is more than
        its folder's files (an adapter merged in). None goes back to hashing the folder."""
        self._weights_sha256 = digest

    @property
    def prompt_sha256(self) -> str | None:
        """The digest of the prompt this classifier reads (`engine.models.prompt_digest.prompt_sha256`), part of every
        key that depends on the prompt; None here: a classifier with a head reads no prompt."""
        return None

    def parameters_sha256(self) -> str:
        """SHA-256 (hex) of the model's parameters: every state-dict entry's name and float32 values, in name order.

        The identity of a model that has no weights file (built in memory): two random initialisations never
        share it. Computed on the first call and kept on this object (a copy made after shares it)."""
        digest = self.__dict__.get("_parameters_sha256")
        if digest is None:
            h = hashlib.sha256()
            for name, tensor in sorted(self.model.state_dict().items()):
                h.update(name.encode())
                h.update(tensor.detach().to(torch.float32).cpu().contiguous().numpy().tobytes())
            digest = self._parameters_sha256 = h.hexdigest()
        return digest

    @property
    def kind(self) -> ModelKind:
        """What the classifier is built of: a sequence-classification head or the BiLSTM, read from the model itself
        (a PromptedClassifier answers 'prompted LM'). The one test of a classifier's kind: pages, measures and
        commands ask this, never isinstance or an attribute's presence."""
        # the model may be absent (a classifier built without __init__, as the kind-only tests do): a head
        architecture = getattr(getattr(getattr(self, "model", None), "config", None), "architecture", None)
        return ModelKind.BILSTM if architecture == BILSTM_ARCHITECTURE else ModelKind.HEAD

    @property
    def id(self) -> str:
        return self.metadata.get("id", "unsaved")  # read by every result and page: no typed copy needed

    @property
    def replacement_token_id(self) -> int | None:
        """The token masking writes: metadata's `replacement_token_id`, else the tokenizer's mask token, else None."""
        # read from the dict, not through `meta`: every masking call asks, and typing the whole metadata each time
        # was part of the fixed per-call cost of the gradient measures (bench/importance.py)
        chosen = self.metadata.get("replacement_token_id")
        if chosen is not None:
            return int(chosen)
        return None if self.tokenizer.mask_token_id is None else int(self.tokenizer.mask_token_id)

    @property
    def mask_token_id(self) -> int:
        """The replacement token id; NotApplicableError when the model has none (a decoder not given one)."""
        token = self.replacement_token_id
        if token is None:
            raise NotApplicableError(
                f"model {self.id!r} has no mask token and no replacement token was chosen, so it cannot be "
                "masked (masking-based measures, curves, MaSF). Register it with one: python -m engine models add "
                "FOLDER --replacement pad (or unk, or a token of its vocabulary)")
        return token

    @property
    def masked_fine_tuned(self) -> bool:
        """Whether the model was trained on inputs with the replacement token (so masked inputs are in
        distribution): masked fine-tuning here, or declared at registration (`CheckpointMeta.masked_fine_tuned`)."""
        return self.meta.masked_fine_tuned

    @property
    def artifacts_dir(self):
        """Where files fitted for this model (MaSF) are kept: its checkpoint folder, or for a registered
        model fine-tuned elsewhere a folder of its own under the user folder (never the user's model folder)."""
        from pathlib import Path

        if "artifacts_dir" in self.metadata:  # a model fine-tuned elsewhere: its own folder, or none
            own = self.metadata["artifacts_dir"]
            return Path(own) if own else None
        return self.folder

    @property
    def runtime(self) -> dict:
        """How the model runs now, for provenance: device, dtype of its parameters, attention kernel, and (when
        loaded by engine.models.loading) the dtype its weights were stored in and why each was chosen."""
        first = next(iter(self.model.parameters()), None)
        out = {"device": str(self.device), "dtype": dtype_name(first.dtype) if first is not None else None,
               "attn_implementation": attention_implementation(self.model)}
        loaded = self.load_runtime or {}
        out.update({k: loaded[k] for k in ("stored_dtype", "dtype_reason", "attn_reason") if k in loaded})
        return out

    def attention_weights_available(self) -> tuple[bool, str]:
        """(whether a forward can return attention weights, why not): eager attention, or a model that can switch
        to it for such forwards (`eager_attention`)."""
        impl = self._attention_default
        if impl in (None, "eager") or type(self.model)._can_set_attn_implementation():
            return True, ""
        return False, (f"model {self.id!r} runs {impl!r} attention, which returns no attention weights, and cannot "
                       "switch to eager at run time: load it with ENGINE_ATTENTION=eager")

    @contextmanager
    def eager_attention(self):
        """Run the enclosed forwards with eager attention, the only kernel that returns attention weights, then
        switch back. A lock keeps two threads (dashboard sessions share a model) from switching at once; a
        forward of another thread meanwhile also runs eager, which changes its numbers only by float rounding."""
        if self._attention_default in (None, "eager"):
            yield
            return
        with self._attention_lock:
            self.model.set_attn_implementation("eager")
            try:
                yield
            finally:
                self.model.set_attn_implementation(self._attention_default)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def embedding_matrix(self) -> torch.Tensor:
        """E [V, H]: the word-embedding table."""
        return self.model.get_input_embeddings().weight

    def check_dataset(self, dataset: Dataset) -> Dataset:
        """The dataset with its labels in this model's class order (`engine.data.labels.align_to_classes`:
        matched by name, whole-number labels by index); callers use what it returns. Raises
        LabelMismatchError, naming both class lists, when a label of the data is not one of the model's."""
        return align_to_classes(dataset, self.classes, model=repr(self.id))

    def target_words(self) -> dict[str, int]:
        """Words other than the class names that name a class as a target, each with its class index (keys as
        `engine.data.labels.label_key` spells them): none for an encoder; a prompted LM's verbalizer words."""
        return {}

    def _classes_listed(self) -> str:
        listed = ", ".join(f"{k} {name!r}" for k, name in enumerate(self.classes))
        words = self.target_words()
        return f"this model's classes are {listed}" + (
            f" (its label words: {', '.join(sorted(words))})" if words else "")

    def check_target(self, target: int | str) -> int:
        """The class index that `target` names: an index (a whole number, or a string of digits), a class name
        (as given; else up to case, surrounding space and transformers' `LABEL_k` spelling, as data labels are
        matched: engine.data.labels), or a word of `target_words` (a prompted LM's label words). A string of
        digits is a class index unless a class name reads as a number, as for data labels (classes '1'..'5' are
        named, not indexed). Anything else raises InvalidInputError listing the classes."""
        if isinstance(target, str):
            text = target.strip()
            if text in self.classes:
                return list(self.classes).index(text)
            loose = [k for k, name in enumerate(self.classes) if label_key(name) == label_key(text)]
            if len(loose) == 1:
                return loose[0]
            if len(loose) > 1:
                raise InvalidInputError(f"target {target!r} matches {len(loose)} classes up to case: "
                                        f"{self._classes_listed()}; give the class name exactly or its index")
            numbered = any(re.fullmatch(r"-?\d+", label_key(name)) for name in self.classes)
            if re.fullmatch(r"\d+", text) and not numbered:
                index = int(text)
            elif label_key(text) in self.target_words():
                return self.target_words()[label_key(text)]
            else:
                raise InvalidInputError(f"target {target!r} names no class: {self._classes_listed()}; give a class "
                                        "name or its index")
        elif isinstance(target, numbers.Integral) or (isinstance(target, float) and target.is_integer()):
            index = int(target)
        elif isinstance(target, torch.Tensor) and target.numel() == 1 and not target.is_floating_point():
            index = int(target.item())
        else:
            raise InvalidInputError(f"target {target!r} is neither a class name nor a class index: {self._classes_listed()}")
        if not 0 <= index < self.num_classes:
            raise InvalidInputError(f"target class {target} is out of range: this model has classes 0..{self.num_classes - 1} ({', '.join(self.classes)})")
        return index

    def targets_for(self, batch: Batch, target=None) -> torch.Tensor:
        """The explained class of each input of `batch` [B] (long, on the model's device): the model's prediction
        when `target` is None, else `target` checked as in `check_targets`."""
        if target is None:
            with torch.no_grad():
                return self.predict_logits(batch.to(self.device)).argmax(-1)
        return self.check_targets(target, len(batch))

    def check_targets(self, target, n: int) -> torch.Tensor:
        """The explained class of each of `n` inputs as a long tensor [n] on the model's device: `target` is one
        class for all inputs or one per input; every class is checked against the model's (the one place
        targets are resolved, so every caller gets the same error for the same mistake)."""
        if isinstance(target, str) or (isinstance(target, (list, tuple)) and any(isinstance(v, str) for v in target)):
            target = [self.check_target(v) for v in ([target] if isinstance(target, str) else target)]
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

    # -- cost ------------------------------------------------------------------------------------------------
    @property
    def counted_module(self) -> torch.nn.Module:
        """The module every forward of this classifier runs, once per row: where the cost meter
        (`engine.faithfulness.cost`) counts rows. The model itself; a prompted LM overrides it (its forward runs the
        LM's base model, not the LM's own forward)."""
        return self.model

    # -- what the measures explain ----------------------------------------------------------------
    def explained_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """The per-class quantity [N, C] every measure explains (gradients, IG, LOO, occlusion, SHAP/LIME, beam),
        from this model's `logits` [N, C]: the logits themselves. A prompted LM overrides it with the class
        log-odds (docs/methods.md#prompted-language-models)."""
        return logits

    # -- forward ------------------------------------------------------------------------------
    def maskable_tokens(self, batch: Batch, row: int = 0) -> list[str]:
        """The word pieces at row `row`'s maskable positions, in text order: what every score vector over
        maskable tokens (`Importance.token_scores`) is aligned to."""
        ids = batch.input_ids[row].cpu()[batch.maskable[row].cpu()].tolist()
        return self.tokenizer.convert_ids_to_tokens(ids)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                output_attentions: bool = False, output_hidden_states: bool = False) -> ForwardOutput:
        """One forward of the model on ids [B, T] or word embeddings [B, T, H] (right-padded, with the
        attention mask [B, T]); the one place that knows how each family is called. Asking for attentions runs
        the forward with eager attention (`eager_attention`)."""
        if output_attentions:
            with self.eager_attention():
                return self._forward(input_ids, attention_mask, token_type_ids, inputs_embeds, True, output_hidden_states)
        return self._forward(input_ids, attention_mask, token_type_ids, inputs_embeds, False, output_hidden_states)

    def _forward(self, input_ids, attention_mask, token_type_ids, inputs_embeds, output_attentions: bool,
                 output_hidden_states: bool) -> ForwardOutput:
        kwargs = {"attention_mask": attention_mask}
        if output_attentions:
            kwargs["output_attentions"] = True
        if output_hidden_states:
            kwargs["output_hidden_states"] = True
        if input_ids is not None:
            kwargs["input_ids"] = input_ids
        else:
            kwargs["inputs_embeds"] = inputs_embeds
        if not self.decoder:
            if self._token_types and token_type_ids is not None:
                kwargs["token_type_ids"] = token_type_ids
            out = self.model(**kwargs)
            return ForwardOutput(out.logits, getattr(out, "attentions", None), getattr(out, "hidden_states", None))
        # Decoder: the head scores every position; read each row at its last real token.
        out = self.model.base_model(**kwargs)
        per_token = self.model.score(out.last_hidden_state)  # [B, T, C]
        if attention_mask is None:
            last = torch.full((per_token.shape[0],), per_token.shape[1] - 1, device=per_token.device)
        else:
            last = self.pooled_positions(attention_mask)
        logits = per_token[torch.arange(per_token.shape[0], device=per_token.device), last]
        return ForwardOutput(logits, getattr(out, "attentions", None), getattr(out, "hidden_states", None))

    def pooled_positions(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """[B] long: the position whose final state the head reads: 0 ([CLS]) for encoders, the last real
        token for decoders (right padding)."""
        if not self.decoder:
            return torch.zeros(attention_mask.shape[0], dtype=torch.long, device=attention_mask.device)
        positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
        return (positions * (attention_mask != 0)).argmax(-1)

    def logits(self, batch: Batch, input_ids: torch.Tensor | None = None) -> torch.Tensor:
        """[B, C] logits for the batch (optionally with other ids, e.g. masked copies)."""
        return self.forward(input_ids=batch.input_ids if input_ids is None else input_ids,
                            attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids).logits

    def word_embeddings(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[B, T, H] word embeddings only (no position/type embeddings)."""
        return self.model.get_input_embeddings()(input_ids)

    def logits_from_embeddings(self, inputs_embeds: torch.Tensor, batch: Batch) -> torch.Tensor:
        """[B, C] logits from word embeddings [B, T, H]; position and type embeddings are added by
        the model as usual, so scaling `inputs_embeds` scales only the word part (as IG requires)."""
        return self.forward(inputs_embeds=inputs_embeds, attention_mask=batch.attention_mask,
                            token_type_ids=batch.token_type_ids).logits

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
        dataset = self.check_dataset(dataset)
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
