"""The plan of one planted model's report card: what every cell of the card shares, resolved once.

`plan_card(model, config)` loads the model and resolves, once, what its cells need: the planted spec, the weights'
hash (the model's identity in the truth's key and in every cell's provenance), the truth by intervention (checked
learned before any cell runs), the classifier of each removal operator and the self-explanation kinds. The cells
(engine.groundtruth.card_cells) are made from the plan, and the plan is handed to them when they run in this
process; a worker process of a pool or a Ray cluster builds the plan of its cells' model once (`plan_of`).

The plan also holds the work its cells share (`memo`): a measure's scores do not depend on the removal operator,
so the cells of the other operators reuse them, and so the reference scores of the constructed explanations, the
random deletion curves of RACU and NAOPC's bounds. Every memo entry is a pure function of its key.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cached_property

from engine.errors import InvalidInputError, NotApplicableError
from engine.faithfulness.registry import INFILL_OPERATORS
from engine.groundtruth.card_config import OPERATORS, CardConfig
from engine.groundtruth.mechanisms import PlantSpec
from engine.groundtruth.selfexplain_card import self_explanation_kinds
from engine.groundtruth.truth import MIN_DECIDING, Truth
from engine.models.kinds import ModelKind


@dataclass(frozen=True, eq=False)
class CardPlan:
    """One planted model's card, resolved once (module docstring).

    Attributes:
        model: the planted checkpoint id; classifier: its engine Classifier; spec: its PlantSpec.
        weights_sha256: SHA-256 of its weights (None without a folder), recorded in each cell's provenance.
        prompt_sha256: its prompt spec's digest (prompted LMs; None otherwise), part of the truth's key.
        seed, min_deciding: the truth's (engine.groundtruth.truth.establish_truth).
        kinds: the self-explanation kinds its card runs (() for a model that is not a prompted LM).
        operators: removal operator -> (the classifier that removes that way, removal 'mask' or 'delete').
        memo: the work its cells share (module docstring).
    """

    model: str
    classifier: object
    spec: PlantSpec
    weights_sha256: str | None
    prompt_sha256: str | None
    seed: int = 0
    min_deciding: int = MIN_DECIDING
    kinds: tuple[str, ...] = ()
    operators: dict = field(default_factory=dict, repr=False)
    memo: dict = field(default_factory=dict, repr=False)

    @cached_property
    def truth(self) -> Truth:
        """The truth by intervention, read from its store beside the checkpoint or established now, once."""
        from engine.groundtruth.truth_store import load_or_establish_truth

        return load_or_establish_truth(self.classifier, self.seed, self.min_deciding, spec=self.spec,
                                       weights_sha256=self.weights_sha256, prompt_sha256=self.prompt_sha256)

    def operator(self, operator: str) -> tuple[object, str]:
        """(classifier, removal) of `operator` (operator_classifier), made once per plan."""
        if operator not in self.operators:
            self.operators[operator] = operator_classifier(self.classifier, operator)
        return self.operators[operator]

    def inputs(self, limit: int) -> list:
        """The first `limit` deciding inputs as Examples whose label is the class the model predicts on them (the
        explained class): every cell of a card (any kind) scores these same inputs.

        Raises:
            MechanismNotLearned: the model does not follow its mechanism; NotApplicableError: no deciding input."""
        from engine.data.types import Example

        truth = self.truth
        truth.require_learned()
        rows = truth.deciding.head(limit)
        examples = [Example(primary=r.planted, label=int(r.pred_planted), uid=str(r.uid)) for r in rows.itertuples()]
        if not examples:
            raise NotApplicableError(f"model {self.model!r}: no deciding input to score ({truth.reason})")
        return examples


def plan_card(model: str, config: CardConfig | None = None) -> CardPlan:
    """The plan of `model`'s card under `config` (module docstring): the model loaded, its spec, identity and
    self-explanation kinds resolved, and, unless `config.truth_only`, every operator's classifier made and the truth
    established and checked learned, so that a card that cannot run is refused before any cell does.

    Raises:
        InvalidInputError: an option wrong whatever the model (CardConfig.check).
        MechanismNotLearned: the model did not learn its mechanism.
        NotApplicableError: a model that was not planted, an operator it does not support, self-explanations asked
            of a model that is not a prompted LM, interactions asked of a mechanism without a known pair.
    """
    from engine.groundtruth.planting import planted_spec
    from engine.models import load_classifier

    config = config or CardConfig()
    config.check()
    classifier = load_classifier(model)
    spec = planted_spec(classifier)
    plan = CardPlan(model=model, classifier=classifier, spec=spec, weights_sha256=classifier.weights_sha256,
                    prompt_sha256=classifier.prompt_sha256, seed=config.seed,
                    min_deciding=config.min_deciding, kinds=self_explanation_kinds(classifier, config.self_explanations))
    if config.truth_only:  # its TruthCell establishes the truth (in the worker that runs it); nothing is checked
        return plan
    for op in config.operators:
        plan.operator(op)
    plan.truth.require_learned()
    return plan


def operator_classifier(classifier, operator: str):
    """(classifier whose replacement token is the operator's, removal 'mask' or 'delete') for `operator`.

    mask: the model's own replacement ([MASK]); unk / pad: the tokenizer's unk / pad token; delete: the token is
    dropped (ERASER's removal); retrieval / mlm: filled in by a token of the model's data or by the packaged tiny
    MLM's guess (ICE's infill operators; the MLM needs the model's vocabulary); redacted: a prompted LM's
    '[REDACTED]' replacement, offered when its prompt spec replaces by redaction (then it is the model's own
    replacement, the same as mask: the classifier itself). The copy shares the model's weights.

    Raises:
        NotApplicableError: an operator the model does not support (lists those it does).
    """
    if operator not in OPERATORS:
        raise InvalidInputError(f"unknown masking operator {operator!r}; use one of {', '.join(OPERATORS)}")
    if operator == "mask":
        return classifier, "mask"
    if operator == "delete":
        return classifier, "delete"
    if operator in INFILL_OPERATORS:  # retrieval / MLM infill (engine/faithfulness/infill.py): a twin, the length kept
        from engine.faithfulness.infill import infill_operator

        return infill_operator(classifier, operator), "mask"
    if operator == "redacted":
        if _redacts(classifier):  # the model's own replacement is [REDACTED]: the same as its "mask"
            return classifier, "mask"
        raise NotApplicableError(f"model {classifier.id!r}: the [REDACTED] operator needs a prompted LM whose prompt "
                                 f"spec replaces by redaction; supported here: {', '.join(supported_operators(classifier))}")
    token = getattr(classifier.tokenizer, f"{operator}_token_id", None)
    if token is None:
        raise NotApplicableError(f"model {classifier.id!r} has no {operator} token; supported operators: "
                                 f"{', '.join(supported_operators(classifier))}")
    twin = copy.copy(classifier)
    twin.metadata = {**classifier.metadata, "replacement_token_id": int(token), "replacement_token": operator}
    return twin, "mask"


def supported_operators(classifier) -> list[str]:
    """The operators `operator_classifier` accepts for this model."""
    out = ["mask", "delete"]
    out += [op for op in ("unk", "pad") if getattr(classifier.tokenizer, f"{op}_token_id", None) is not None]
    if (getattr(classifier, "metadata", None) or {}).get("dataset"):
        out.append("retrieval")
    from engine.faithfulness.infill import mlm_compatible

    if mlm_compatible(classifier):
        out.append("mlm")
    if _redacts(classifier):
        out.append("redacted")
    return out


def _redacts(classifier) -> bool:
    """Whether the model is a prompted LM whose own replacement is redaction (its prompt spec's `replacement`)."""
    # a stand-in without a kind (a namespace of a classifier's attributes) is no prompted LM
    return getattr(classifier, "kind", None) is ModelKind.PROMPTED and classifier.spec.replacement == "redacted"


#: the plans a worker process built for the cells it runs (one per model and truth), so each is built once there
_WORKER_PLANS: dict = {}


def plan_of(cell) -> CardPlan:
    """The plan of `cell`'s model in a process that was handed none (a pool's or a Ray cluster's worker, a cell
    computed on its own): built once per (model, seed, min_deciding) in this process, with no operator resolved
    yet (each is made on first use) and the truth established on first use."""
    key = (cell.model, cell.seed, cell.min_deciding)
    if key not in _WORKER_PLANS:
        _WORKER_PLANS[key] = plan_card(cell.model, CardConfig(seed=cell.seed, min_deciding=cell.min_deciding,
                                                              truth_only=True, self_explanations=()))
    return _WORKER_PLANS[key]


__all__ = ["CardPlan", "operator_classifier", "plan_card", "plan_of", "supported_operators"]
