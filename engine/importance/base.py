"""The common signature of every importance measure (captum style) and the registry of measures.

    explainer = get_explainer("ig-sign", classifier, steps=50)   # parameters in __init__
    importance = explainer.attribute(batch, target=None)          # work in one call -> Importance

Shapes: B inputs, T padded tokens. Every measure returns scores [B, T] (float32, on the CPU) that are 0
wherever `batch.maskable` is False: special tokens, padding and the auxiliary sequence of a paired task
never get importance (REFERENCE section 2). Scores are in the unit of the target class's logit unless a
measure's docstring says otherwise (ranks, attention weights, probabilities of U(0, 1)).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import torch

from engine.errors import ExplanationCancelled, InvalidInputError, NoMaskableTokenError  # noqa: F401 (re-exported)
from engine.importance.memo import freeze, memoised, tensor_digest
from engine.models import Batch, Classifier

Progress = Callable[[int, int], None]
ShouldStop = Callable[[], bool]


@dataclass(frozen=True)
class Importance:
    """Scores of one measure for a batch, with their provenance.

    scores [B, T] float32: importance per token, 0 on positions that are not maskable;
    maskable [B, T] bool: which positions carry a score (the primary sequence's non-special tokens);
    target [B] long: the class explained per input; target_source: 'predicted' (argmax of the model
    on the unmodified input) or 'given' (passed by the caller, e.g. the gold label);
    measure, options: the measure id and every option that affects the scores;
    signed: whether the sign of a score means something (red/blue in the UI);
    model_id: the checkpoint id of the explained model;
    extras: measure-specific diagnostics, e.g. IG's per-input `completeness_gap` [B].
    """

    scores: torch.Tensor
    maskable: torch.Tensor
    target: torch.Tensor
    measure: str
    options: dict
    target_source: str
    signed: bool = False
    model_id: str = "unsaved"
    extras: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return self.scores.shape[0]

    def token_scores(self, i: int) -> torch.Tensor:
        """Row i's scores on its maskable tokens only, in text order: [N_i]."""
        return self.scores[i][self.maskable[i]]

    def copy(self) -> Importance:
        return replace(self, scores=self.scores.clone(), maskable=self.maskable.clone(), target=self.target.clone(),
                       options=dict(self.options), extras=dict(self.extras))


MEASURES: dict[str, type[Explainer]] = {}


def register(cls: type[Explainer]) -> type[Explainer]:
    """Class decorator: add an `Explainer` subclass to `MEASURES` under its `name`."""
    if not getattr(cls, "name", None):
        raise TypeError(f"{cls.__name__} has no measure name")
    if cls.name in MEASURES and MEASURES[cls.name] is not cls:
        raise InvalidInputError(f"measure {cls.name!r} is registered twice ({MEASURES[cls.name].__name__}, {cls.__name__})")
    MEASURES[cls.name] = cls
    return cls


def get_explainer(name: str, classifier: Classifier, **options) -> Explainer:
    """The explainer of measure `name` for `classifier`, with `options` (see each class's `defaults`)."""
    cls = MEASURES.get(name)
    if cls is None:
        raise InvalidInputError(f"unknown importance measure {name!r}; known measures: {', '.join(MEASURES)}")
    return cls(classifier, **options)


def describe(name: str) -> str:
    """The first line of a measure's docstring."""
    doc = (MEASURES[name].__doc__ or "").strip()
    return doc.splitlines()[0] if doc else name


@dataclass
class Call:
    """Everything one `attribute` call's computation needs (passed to `Explainer._scores`)."""

    batch: Batch
    target: torch.Tensor  # [B] long, on the model's device
    logits: torch.Tensor | None  # [B, C] logits of the unmodified input, when already computed
    progress: Progress | None
    should_stop: ShouldStop | None

    def check_stop(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise ExplanationCancelled("the explanation was cancelled")


class Explainer:
    """Base class of every measure. Subclasses set `name`, `signed`, `defaults` (every option with its
    default value; `choices` restricts some) and implement `_scores(call) -> (scores [B, T], extras)`.

    Common keyword arguments, not measure options (all but bf16 leave the scores unchanged, so only bf16
    is recorded as provenance):
    memo: memoise results per (model, input, target, measure, options) in the model's LRU (default True);
    bf16: run the model under bfloat16 autocast (default False). About 2x faster on CPUs with AVX512-BF16
        and on GPUs, but scores move. Only measures whose rankings stay within tolerance accept it
        (`bf16_ok`: the gradient family, IG, attention) and it is then recorded in `options` as bf16=True.
        Tolerance, against float32 on 40 rt test inputs of tiny and minilm (`bench/importance.py
        --bf16-agreement`): median Spearman >= 0.99, 5th percentile >= 0.98, top-10% overlap >= 0.95.
        LOO (5th percentile 0.88-0.95) and beam fail it: their logit differences of a few hundredths are
        of the size of bf16 rounding;
    memory_mb: the memory one batched pass may use, which sets how many rows go into one forward
        (default 1024 on CPU, 4096 on CUDA); max_rows: an upper bound on rows per pass;
    progress(done, total), should_stop(): streaming and cancellation (also accepted by `attribute`).
    """

    name: ClassVar[str] = ""
    signed: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {}
    choices: ClassVar[dict[str, tuple]] = {}
    bf16_ok: ClassVar[bool] = False  # rankings under bf16 autocast agree with float32 (see bench)
    computed_once: ClassVar[bool] = False  # inherently recursive (beam): recursive masking calls it once
    deterministic: ClassVar[bool] = True  # same input -> same scores (memoisable)
    uses_replacement: ClassVar[bool] = False  # writes the mask/replacement token: the model must have one

    def __init__(self, classifier: Classifier, *, memo: bool = True, bf16: bool = False, memory_mb: float | None = None,
                 max_rows: int | None = None, progress: Progress | None = None,
                 should_stop: ShouldStop | None = None, **options):
        unknown = sorted(set(options) - set(self.defaults))
        if unknown:
            accepted = ", ".join(f"{k} (default {v!r})" for k, v in self.defaults.items()) or "none"
            raise InvalidInputError(f"measure {self.name!r} has no option {', '.join(map(repr, unknown))}; its options: {accepted}")
        self.classifier = classifier
        self.options = {k: self._coerce(k, options.get(k, v)) for k, v in self.defaults.items()}
        self.memo = bool(memo)
        self.bf16 = bool(bf16)
        if self.bf16:
            if not self.bf16_ok:
                ok = ", ".join(n for n, c in MEASURES.items() if c.bf16_ok)
                raise InvalidInputError(f"measure {self.name!r} does not offer bf16: its ranking under bfloat16 autocast is not "
                                 f"within tolerance of float32 (measures that do: {ok or 'none'})")
            self.options["bf16"] = True
        self.memory_mb = memory_mb
        self.max_rows = max_rows
        self.progress = progress
        self.should_stop = should_stop
        self._check_options()

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}({self.name!r}{', ' if opts else ''}{opts})"

    @property
    def seed(self) -> int:
        return int(self.options.get("seed", 0))

    # -- options ----------------------------------------------------------------------------------
    def _coerce(self, key: str, value: Any) -> Any:
        """Options may arrive as strings (command line): convert them to the default's type."""
        default = self.defaults[key]
        try:
            if isinstance(default, bool):
                if isinstance(value, str):
                    if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
                        raise InvalidInputError(value)
                    value = value.lower() in ("1", "true", "yes")
                value = bool(value)
            elif isinstance(default, int) and not isinstance(value, bool):
                if isinstance(value, float) and not value.is_integer():
                    raise InvalidInputError(value)
                value = int(value)
            elif isinstance(default, float):
                value = float(value)
            elif isinstance(default, str):
                value = str(value)
        except (TypeError, ValueError):
            raise InvalidInputError(f"option {key!r} of measure {self.name!r} must be a {type(default).__name__}, got {value!r}") from None
        allowed = self.choices.get(key)
        if allowed is not None and value not in allowed:
            raise InvalidInputError(f"option {key!r} of measure {self.name!r} must be one of {', '.join(map(str, allowed))}; got {value!r}")
        return value

    def _check_options(self) -> None:
        """Subclasses validate ranges here (raise ValueError)."""

    def supports(self) -> tuple[bool, str]:
        """(True, '') when this measure can explain this classifier, else (False, why)."""
        if self.uses_replacement and self.classifier.replacement_token_id is None:
            return False, ("it replaces tokens, and this model has no mask token and no chosen replacement token "
                           "(python -m engine models add FOLDER --replacement pad|unk|TOKEN)")
        return True, ""

    # -- the one public call ----------------------------------------------------------------------
    def attribute(self, batch: Batch, target: torch.Tensor | Sequence[int] | int | None = None,
                  progress: Progress | None = None, should_stop: ShouldStop | None = None) -> Importance:
        """Importance of every token of `batch` for class `target` (default: the predicted class).

        batch: B inputs of T tokens; target: one class for all inputs, or [B] classes.
        Returns an `Importance` with scores [B, T] (0 where `batch.maskable` is False)."""
        ok, why = self.supports()
        if not ok:
            raise InvalidInputError(f"measure {self.name!r} cannot explain model {self.classifier.id!r}: {why}")
        batch = batch.to(self.classifier.device)
        empty = (~batch.maskable.any(dim=1)).nonzero().flatten().tolist()
        if empty:
            raise NoMaskableTokenError(
                f"input {empty[0]} has no maskable token: only primary-text tokens (not special tokens, padding "
                "or the auxiliary question) can be explained")
        given = None if target is None else self._as_target(target, len(batch))
        key = (self.name, freeze(self.options), tensor_digest(batch.input_ids, batch.attention_mask,
               batch.token_type_ids, batch.maskable), None if given is None else tuple(given.tolist()))
        call_progress = progress or self.progress
        call_stop = should_stop or self.should_stop

        def compute() -> Importance:
            logits = None
            if given is None:  # the prediction is the target (shared by every measure on this input)
                logits = self.input_logits(batch)
                tgt = logits.argmax(-1)
            else:
                tgt = given
            call = Call(batch=batch, target=tgt, logits=logits, progress=call_progress, should_stop=call_stop)
            scores, extras = self._scores(call)
            maskable = batch.maskable
            scores = torch.where(maskable, scores.detach().to(torch.float32), torch.zeros((), dtype=torch.float32,
                                 device=scores.device))
            return Importance(scores=scores.cpu(), maskable=maskable.cpu(), target=tgt.cpu(), measure=self.name,
                              options=dict(self.options), target_source="predicted" if given is None else "given",
                              signed=self.signed, model_id=self.classifier.id, extras=extras)

        result = memoised(self.classifier.model, key, compute, enabled=self.memo and self.deterministic)
        return result.copy()

    def __call__(self, batch: Batch, target=None, **kwargs) -> Importance:
        return self.attribute(batch, target, **kwargs)

    def _scores(self, call: Call) -> tuple[torch.Tensor, dict]:
        raise NotImplementedError

    # -- helpers shared by the families -------------------------------------------------------------
    def _as_target(self, target, n: int) -> torch.Tensor:
        t = torch.as_tensor(target, dtype=torch.long).reshape(-1)
        if t.numel() == 1 and n != 1:
            t = t.expand(n)
        if t.numel() != n:
            raise InvalidInputError(f"{n} inputs but {t.numel()} targets")
        for v in t.tolist():
            self.classifier.check_target(v)
        return t.to(self.classifier.device).clone()

    def input_logits(self, batch: Batch) -> torch.Tensor:
        """Logits [B, C] of the unmodified batch (memoised per input, so measures share one forward)."""
        def compute():
            with torch.no_grad():
                return self.classifier.logits(batch)
        key = ("logits", tensor_digest(batch.input_ids, batch.attention_mask, batch.token_type_ids))
        return memoised(self.classifier.model, key, compute, enabled=self.memo)

    def autocast(self):
        """bfloat16 autocast around model calls when `bf16` was asked for (a no-op otherwise)."""
        return torch.autocast(device_type=self.classifier.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def _shared(self, key, compute: Callable[[], Any], call: Call) -> Any:
        """Memoise a quantity several measures share (e.g. the gradient), keyed on the input and the target."""
        b = call.batch
        full = (key, self.bf16, tensor_digest(b.input_ids, b.attention_mask, b.token_type_ids, b.maskable),
                tuple(call.target.tolist()))
        return memoised(self.classifier.model, full, compute, enabled=self.memo)

    def rows_per_pass(self, T: int, backward: bool) -> int:
        """How many rows of T tokens one forward (and backward) may take: within `memory_mb`, and on a CPU
        at most 4096 tokens per pass, where throughput peaks (IG's 50 steps of a 64-token input in one
        pass, as captum does: splitting them in two cost 1.4x, bench/importance.py)."""
        cfg = getattr(self.classifier.model, "config", None)
        H = int(getattr(cfg, "hidden_size", 256) or 256)
        L = int(getattr(cfg, "num_hidden_layers", 1) or 1)
        heads = int(getattr(cfg, "num_attention_heads", 1) or 1)
        inter = int(getattr(cfg, "intermediate_size", 4 * H) or 4 * H)
        elem = torch.finfo(self.classifier.embedding_matrix.dtype).bits // 8
        if backward:  # activations kept for the backward pass, every layer
            per_row = L * T * (10 * H + 2 * inter + 3 * heads * T) * elem
        else:  # one layer's transient activations
            per_row = T * (6 * H + 2 * inter + 2 * heads * T) * elem
        cuda = self.classifier.device.type == "cuda"
        budget = (self.memory_mb or (4096 if cuda else 1024)) * 2**20
        if self.max_rows:
            cap = self.max_rows
        elif cuda:
            cap = 1024
        else:  # CPU throughput peaks at a few thousand tokens per pass and falls beyond (cache), see bench
            cap = max(1, 4096 // T)
        return int(max(1, min(cap, budget // max(per_row, 1))))

    def forward_logits(self, call: Call, input_ids: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Logits [N, C] (no gradient) of `input_ids` [N, T], row n using the attention/type ids of batch
        row `rows[n]`; chunked to the memory budget and trimmed of trailing padding per chunk."""
        b = call.batch
        n, T = input_ids.shape
        out = []
        step = self.rows_per_pass(T, backward=False)
        with torch.no_grad():
            for start in range(0, n, step):
                call.check_stop()
                r = rows[start:start + step]
                with self.autocast():
                    logits = self.classifier.logits(*_rows_batch(input_ids[start:start + step], b.attention_mask[r],
                                                                 b.token_type_ids[r]))
                out.append(logits.float() if self.bf16 else logits)
        return torch.cat(out) if out else torch.zeros(0, self.classifier.num_classes, device=input_ids.device)

    def embedding_logits(self, call: Call, embeds: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Logits [N, C] (no gradient) from word embeddings [N, T, H], row n with the attention/type ids of
        batch row `rows[n]`; chunked like `forward_logits`."""
        b = call.batch
        n, T, _ = embeds.shape
        out = []
        step = self.rows_per_pass(T, backward=False)
        with torch.no_grad():
            for start in range(0, n, step):
                call.check_stop()
                r = rows[start:start + step]
                L = int(b.attention_mask[r].sum(1).max())
                mini, _ = _rows_batch(None, b.attention_mask[r][:, :L], b.token_type_ids[r][:, :L], trim=False)
                with self.autocast():
                    logits = self.classifier.logits_from_embeddings(embeds[start:start + step, :L], mini)
                out.append(logits.float() if self.bf16 else logits)
        return torch.cat(out)

    def embedding_gradients(self, call: Call, n: int, make_embeds: Callable[[slice], torch.Tensor],
                            rows: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None,
                            ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sum over path rows of the gradient of weight[n] * logit_{target[n]} w.r.t. the word embeddings.

        n rows; `make_embeds(slice)` returns the word embeddings [m, T, H] of rows slice (built lazily so
        n x T x H never has to fit in memory at once); row n uses the attention/type ids of batch row
        `rows[n]` and its gradient is added to out[rows[n]]. Returns (out [B, T, H], logits [n, C]).
        Rows go through in as few forward+backward passes as the memory budget allows."""
        b = call.batch
        B, T = b.input_ids.shape
        out = None
        logits_all = []
        step = self.rows_per_pass(T, backward=True)
        for start in range(0, n, step):
            call.check_stop()
            sl = slice(start, min(start + step, n))
            r = rows[sl]
            L = int(b.attention_mask[r].sum(1).max())
            e = make_embeds(sl)[:, :L].detach().requires_grad_(True)
            with torch.enable_grad(), self.autocast():
                logits = self.classifier.logits_from_embeddings(
                    e, _rows_batch(None, b.attention_mask[r][:, :L], b.token_type_ids[r][:, :L], trim=False)[0])
                logits = logits.float() if self.bf16 else logits
                picked = logits.gather(1, target[sl, None]).squeeze(1)
                if weight is not None:
                    picked = picked * weight[sl].to(picked.dtype)
                (g,) = torch.autograd.grad(picked.sum(), e)
            if out is None:
                out = torch.zeros(B, T, g.shape[-1], dtype=g.dtype, device=g.device)
            out[:, :L].index_add_(0, r, g)
            logits_all.append(logits.detach())
        return out, torch.cat(logits_all)


def _rows_batch(input_ids: torch.Tensor | None, attention_mask: torch.Tensor, token_type_ids: torch.Tensor,
                trim: bool = True) -> tuple[Batch, torch.Tensor | None]:
    """A minimal `Batch` for `Classifier.logits` (which reads ids, attention and type ids only), with the
    trailing columns that are padding in every row cut off (right padding: results are unchanged)."""
    if trim:
        L = int(attention_mask.sum(1).max())
        attention_mask, token_type_ids = attention_mask[:, :L], token_type_ids[:, :L]
        input_ids = None if input_ids is None else input_ids[:, :L]
    ids = input_ids if input_ids is not None else torch.zeros_like(attention_mask)
    n = attention_mask.shape[0]
    blank = torch.zeros_like(attention_mask)
    batch = Batch(input_ids=ids, attention_mask=attention_mask, token_type_ids=token_type_ids, segments=blank,
                  maskable=blank.bool(), target=None, truncated=torch.zeros(n, dtype=torch.bool), offsets=[])
    return batch, ids
