"""The cells of a report card (docs/ground-truth.md) and which of them a card has.

Cells (in `<results>/groundtruth/<run>/cells/`, the ResultsStore format):

    TruthCell(model, seed, min_deciding)        the intervention truth (engine.groundtruth.truth): one row per
                                                rate (flip rates, accuracies) with its Wilson CI
    ReportCardCell(model, operator, explanation, limit, ...)
                                                on the first `limit` deciding inputs: per input, the metrics of one
                                                explanation (a measure id, or 'explanation:<kind>' for the true and
                                                hard wrong explanations of engine.groundtruth.explanations) under
                                                one masking operator, and for a measure its recovery of the planted
                                                word(s) (engine.groundtruth.recovery)
    SelfExplanationCell(model, kind, limit, ...) (prompted LMs; engine.groundtruth.selfexplain_card)
                                                on the same deciding inputs: the model's own counterfactual /
                                                attribution / redaction explanation, whether it names the planted
                                                word, the test's verdicts and whether they agree with the truth
    InteractionCell(model, limit, budget, ...)  (opt-in, AND / OR / threshold models; engine.groundtruth.interactions)
                                                on the same deciding inputs: whether shapley-interactions' top pair is
                                                the planted pair and the sign of its interaction against theory's
                                                (rows: kind 'interaction', method 'interaction-recovery')

A cell's key is its fields (with `kind`); a field at the default it had before it existed is left out of the key, so
the cells stored before it keep their keys and a run resumes. How each cell is computed: engine.groundtruth.card_compute.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.errors import InvalidInputError, NotApplicableError
from engine.groundtruth.card_config import DEFAULT_METRIC_FAMILIES, CardConfig
from engine.groundtruth.card_plan import CardPlan, plan_card
from engine.groundtruth.explanations import PREFIX, explanations_for
from engine.groundtruth.interactions import DEFAULT_INTERACTION_BUDGET, INTERACTION_MECHANISMS
from engine.groundtruth.selfexplain_card import SelfExplanationCell
from engine.groundtruth.truth import MIN_DECIDING

CARD = "report-card"
TRUTH = "truth by intervention"
INTERACTION_CARD = "interaction-recovery"


def _with_min_deciding(key: dict) -> dict:
    """A cell's key without `min_deciding` at its default, so the cells stored before it existed keep their keys
    (and a run resumes); a lowered threshold is part of the key, so its cells are never mixed up with the default's."""
    if key.get("min_deciding") == MIN_DECIDING:
        del key["min_deciding"]
    return key


@dataclass(frozen=True)
class TruthCell:
    """The intervention truth of one planted model (flip rates and accuracies with Wilson CIs); min_deciding: the
    fewest deciding inputs a learned mechanism needs (engine.groundtruth.truth.establish_truth)."""

    model: str
    seed: int = 0
    min_deciding: int = MIN_DECIDING

    def key(self) -> dict:
        return _with_min_deciding({**asdict(self), "kind": TRUTH})


@dataclass(frozen=True)
class ReportCardCell:
    """One explanation (a measure id or 'explanation:<kind>') under one masking operator on a planted model's
    first `limit` deciding inputs.

    Attributes:
        model: planted checkpoint id; operator: one of OPERATORS; explanation: measure id or 'explanation:<kind>'.
        limit: deciding inputs scored; seed: seeds the truth's insertions, `random`, soft draws, F-Fid draws and
        the randomisation test; metrics: families (the registry's card_families()); ffid_draws: F-Fidelity draws per level;
        random_sets: random k-sets of the randomisation test; naopc_beam: NAOPC bounds' beam beyond 12 tokens;
        min_deciding: the fewest deciding inputs a learned mechanism needs (below it the cell is refused);
        measure_options: (key, value) options of the cell's measure (e.g. (("max_steps", "20"),) for ig-sign), as
        `explain --option` takes them; empty: the measure's defaults.
    """

    model: str
    operator: str
    explanation: str
    limit: int = 200
    seed: int = 0
    metrics: tuple[str, ...] = DEFAULT_METRIC_FAMILIES
    ffid_draws: int = 10
    random_sets: int = 20
    naopc_beam: int = 5
    min_deciding: int = MIN_DECIDING
    measure_options: tuple[tuple[str, str], ...] = ()

    @property
    def measure(self) -> str:
        return self.explanation

    def key(self) -> dict:
        d = asdict(self)
        d["metrics"] = list(self.metrics)
        d["kind"] = CARD
        if self.measure_options:
            d["measure_options"] = [list(kv) for kv in self.measure_options]
        else:  # the defaults: the key of the cells stored before options existed
            del d["measure_options"]
        return _with_min_deciding(d)


@dataclass(frozen=True)
class InteractionCell:
    """Interaction recovery (engine.groundtruth.interactions) on a planted AND / OR / threshold model's first `limit`
    deciding inputs: shapley-interactions over words with `budget` evaluations per input, index `index` (k-SII or
    FSII), seeded by `seed`. Opt-in (CardConfig.interactions, report-card --interactions): the default cells'
    keys are unchanged."""

    model: str
    limit: int = 200
    seed: int = 0
    budget: int = DEFAULT_INTERACTION_BUDGET
    index: str = "k-SII"
    min_deciding: int = MIN_DECIDING

    def key(self) -> dict:
        return _with_min_deciding({**asdict(self), "kind": INTERACTION_CARD})


def card_cells(plan, config: CardConfig | None = None, **options) -> list:
    """Every cell of one planted model's card: its TruthCell, then per operator the constructed explanations and
    the measures (operator-major, so a card's first operator lands whole first), and for a prompted LM one
    SelfExplanationCell per self-explanation kind right after the first operator's cells; with
    `config.interactions` an InteractionCell after the truth. `config.truth_only`: the TruthCell alone.

    Args:
        plan: the card's plan (engine.groundtruth.card_plan.CardPlan), or a planted model's id (planned here).
        config: the card's options (default CardConfig()); options: CardConfig fields replacing config's.

    Raises:
        InvalidInputError: an unknown measure / metric / self-explanation kind, a measure option the measure lacks,
            an interaction budget below 4 (all refused before the model is loaded).
        MechanismNotLearned, NotApplicableError: as engine.groundtruth.card_plan.plan_card; and interactions asked of
            a mechanism without a pair of known interaction.
    """
    config = CardConfig.of(config, **options)
    if not isinstance(plan, CardPlan):
        plan = plan_card(plan, config)
    model, seed, min_deciding, limit = plan.model, config.seed, config.min_deciding, config.limit
    if config.truth_only:
        return [TruthCell(model, seed, min_deciding)]
    cells: list = [TruthCell(model, seed, min_deciding)]
    if config.interactions:
        if plan.spec.mechanism not in INTERACTION_MECHANISMS:
            raise NotApplicableError(f"model {model!r} plants {plan.spec.mechanism!r}: --interactions needs "
                                     f"{', '.join(INTERACTION_MECHANISMS)} (pairs whose interaction theory knows)")
        if config.interaction_budget < 4:
            raise InvalidInputError(f"the interaction budget (evaluations per input) must be at least 4, got "
                                    f"{config.interaction_budget}")
        cells.append(InteractionCell(model=model, limit=limit, seed=seed, budget=config.interaction_budget,
                                     min_deciding=min_deciding))
    explanations = [PREFIX + k for k in explanations_for(plan.spec.mechanism)]
    selves = [SelfExplanationCell(model=model, kind=k, limit=limit, seed=seed, min_deciding=min_deciding,
                                  max_new_tokens=config.max_new_tokens) for k in plan.kinds]
    for n, op in enumerate(config.operators):
        for e in (*explanations, *config.measures):
            cells.append(ReportCardCell(model=model, operator=op, explanation=e, limit=limit, seed=seed,
                                        metrics=config.metrics, ffid_draws=config.ffid_draws,
                                        random_sets=config.random_sets, naopc_beam=config.naopc_beam,
                                        min_deciding=min_deciding, measure_options=config.options_of(e)))
        if n == 0:  # operator-independent, and cheaper than another operator: a card cut short has them
            cells += selves
    return cells if config.operators else cells + selves


__all__ = ["CARD", "INTERACTION_CARD", "TRUTH", "InteractionCell", "ReportCardCell", "TruthCell", "card_cells"]
