"""`Explainer`: the base class of every measure (captum style: options in `__init__`, work in one
`attribute(batch, target)` call that returns an `Importance`). It validates options, resolves the target,
memoises results per input and shares intermediate quantities between measures through the memo.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from engine.errors import InvalidInputError, NoMaskableTokenError, NotApplicableError
from engine.importance.batching import BatchedPasses
from engine.importance.memo import freeze, memoised, tensor_digest
from engine.importance.types import Call, Importance, Progress, ShouldStop
from engine.models import Batch, Classifier


def _measure_classes() -> list[type]:
    """Every named subclass of Explainer defined so far (the registry keeps them by name; this module does not import
    it, so the registry may name this module's types and nothing imports in a circle)."""
    found, todo = [], list(Explainer.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if getattr(cls, "name", ""):
            found.append(cls)
    return found


@dataclass(frozen=True)
class PassEstimate:
    """Model rows one explanation of one input costs: forward rows, backward rows (each after its forward), and
    `up_to_forward` / `up_to_backward` where the measure can spend more (IG's escalation to its step budget)."""

    forward: int
    backward: int = 0
    up_to_forward: int | None = None
    up_to_backward: int | None = None


class Explainer(BatchedPasses):
    """Base class of every measure. Subclasses set `name`, `signed`, `defaults` (every option with its
    default value; `choices` restricts some) and implement `_scores(call) -> (scores [B, T], extras)`.

    Common keyword arguments, not measure options (all but bf16 leave the scores unchanged, so only bf16
    is recorded as provenance):
    memo: memoise results per (model, input, target, measure, options) in the model's LRU (default True);
    bf16: run the model under bfloat16 autocast (default False). Faster on CPUs with AVX512-BF16
        and on GPUs, but scores move. Only measures whose rankings stay within tolerance accept it
        (`bf16_ok`: the gradient family, IG, attention) and it is then recorded in `options` as bf16=True.
        Tolerance, against float32 on 40 rt test inputs of tiny and minilm (`bench/importance.py
        --bf16-agreement`): median Spearman >= 0.99, 5th percentile >= 0.98, top-10% overlap >= 0.95.
        LOO (5th percentile 0.88-0.95) and beam fail it: their logit differences of a few hundredths are
        of the size of bf16 rounding;
    memory_mb: the memory one batched pass may use, which sets how many rows go into one forward
        (default 1024 MiB on CPU; on CUDA half the memory free at the call, and a pass that runs out of memory
        is retried with half the rows); max_rows: an upper bound on rows per pass;
    progress(done, total), should_stop(): streaming and cancellation (also accepted by `attribute`).
    """

    name: ClassVar[str] = ""
    # the measure's name in words, for readers (pages, charts, exports); the id stays what commands take and the
    # docstring's first line the formula (`engine.importance.registry.measure_label` / `measure_formula`). A built-in
    # measure's label is in engine.measure_labels (torch-free, for readers that need only the name); `register` sets it
    label: ClassVar[str] = ""
    signed: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {}
    choices: ClassVar[dict[str, tuple]] = {}
    bf16_ok: ClassVar[bool] = False  # rankings under bf16 autocast agree with float32 (see bench)
    computed_once: ClassVar[bool] = False  # inherently recursive (beam): recursive masking calls it once
    deterministic: ClassVar[bool] = True  # same input -> same scores (memoisable)
    uses_replacement: ClassVar[bool] = False  # writes the mask/replacement token: the model must have one
    #: how the measure is seeded: "none" (deterministic), "option" (draws seeded by its `seed` option, default 0,
    #: which runs leave at its default so stored cells keep their numbers), "cell" (the run's seed is the measure's
    #: draw: `random`, a new baseline per seed). `seed_options` reads it.
    seeding: ClassVar[str] = "none"
    #: what one explanation costs, lower is cheaper (engine.explain.by_cost streams the cheapest first): 0 one
    #: forward (attention weights, random); 1 one forward+backward (gradients); 2 tens of forward+backward passes
    #: (IG's steps, GradientSHAP's samples); 3 one forward per token (LOO, occlusion); 4 hundreds of sampled
    #: forwards (KernelSHAP, LIME, Shapley sampling); 5 a search or generation (beam, budgeted search, SMAT,
    #: self-attribution). A measure that declares none sits with the sampling ones.
    cost_tier: ClassVar[int] = 4
    #: its scores do not depend on the model (the `random` baseline: draws from its seed and the token ids only), so a
    #: model retrained on masked data ranks the same tokens; ROAR and Recursive ROAR then share one curve
    #: (engine.faithfulness.retraining). `is_model_independent` reads it.
    model_independent: ClassVar[bool] = False

    def passes(self, n_tokens: int) -> PassEstimate | None:
        """The model passes one input of `n_tokens` maskable tokens costs this measure (`PassEstimate`), or None where
        it depends on a search or a generation (beam, budgeted search, SMAT, self-attribution). A plan for a cost
        estimate (engine.explain.estimate_seconds), not a measurement."""
        return None

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
                ok = ", ".join(sorted(c.name for c in _measure_classes() if c.bf16_ok))
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
            raise NotApplicableError(f"measure {self.name!r} cannot explain model {self.classifier.id!r}: {why}")
        batch = batch.to(self.classifier.device)
        empty = (~batch.maskable.any(dim=1)).nonzero().flatten().tolist()
        if empty:
            raise NoMaskableTokenError(
                f"input {empty[0]} has no maskable token: only primary-text tokens (not special tokens, padding "
                "or the auxiliary question) can be explained")
        given = None if target is None else self._as_target(target, len(batch))
        memo = self.memo and self.deterministic
        # the key (a digest of the batch) only when the memo is on: part of the fixed per-call cost otherwise
        key = (self.name, freeze(self.options), tensor_digest(batch.input_ids, batch.attention_mask,
               batch.token_type_ids, batch.maskable), None if given is None else tuple(given.tolist())) if memo else None
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

        result = memoised(self.classifier.model, key, compute, enabled=memo)
        return result.copy()

    def __call__(self, batch: Batch, target=None, **kwargs) -> Importance:
        return self.attribute(batch, target, **kwargs)

    def _scores(self, call: Call) -> tuple[torch.Tensor, dict]:
        raise NotImplementedError

    # -- helpers shared by the families -------------------------------------------------------------
    def _as_target(self, target, n: int) -> torch.Tensor:
        return self.classifier.check_targets(target, n)

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
