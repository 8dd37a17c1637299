"""The options of a report card (docs/ground-truth.md), in one frozen object with the defaults in one place.

`CardConfig` is what `run_report_card`, the `report-card` command and the dashboard's run form build; the card's
plan (engine.groundtruth.card_plan) and its cells (engine.groundtruth.card_cells) read it. Checking it needs no
model: an unknown measure, metric family or measure option is refused before anything is loaded.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from engine.errors import InvalidInputError
from engine.faithfulness.registry import INFILL_OPERATORS, card_families, default_card_families
from engine.groundtruth.interactions import DEFAULT_INTERACTION_BUDGET
from engine.groundtruth.selfexplain_card import DEFAULT_MAX_NEW_TOKENS, check_kinds
from engine.groundtruth.truth import MIN_DECIDING

#: the removal (masking) operators a card knows (engine.groundtruth.card_plan.operator_classifier)
OPERATORS = ("mask", "delete", "unk", "pad", "redacted", *INFILL_OPERATORS)
#: the measures scored by default: cheap to moderately costly, every family the project has
DEFAULT_MEASURES = ("random", "attention-mean", "grad-l2", "x-grad-sign", "x-grad-abs", "ig-sign", "deeplift",
                    "loo-sign", "loo-abs", "occlusion", "shapley-sampling")
DEFAULT_OPERATORS = ("mask", "delete", "unk")
#: the card's default metric families (engine/faithfulness/registry.py; their order is part of the cells' keys)
DEFAULT_METRIC_FAMILIES = tuple(default_card_families())


@dataclass(frozen=True)
class CardConfig:
    """What one report card scores, and how (every field enters the keys of the cells it concerns).

    Attributes:
        measures: importance measure ids (engine.importance.MEASURES); operators: removal operators (OPERATORS);
        metrics: metric families (the registry's card_families(); their order is part of the cells' keys).
        limit: deciding inputs scored per cell; seed: seeds the truth's insertions, `random`, soft draws, F-Fid draws
        and the randomisation test; ffid_draws: F-Fidelity draws per level; random_sets: random k-sets of the
        randomisation test (20 here; the `report-card` command passes the registry's 99: see its --random-sets);
        naopc_beam: NAOPC bounds' beam beyond 12 tokens.
        truth_only: only each model's TruthCell (its flip rates), nothing scored against it.
        min_deciding: the fewest deciding inputs a learned mechanism needs (lower it for a small card on small data).
        self_explanations: the self-explanation kinds of a prompted LM; None: all three for a prompted LM and none
        for any other model; (): none. max_new_tokens: the longest self-explanation answer, in tokens.
        measure_options: measure id -> {option: value} (as `explain --option`), e.g. {"ig-sign": {"max_steps": "20"}};
        stored as sorted (measure, ((option, value), ...)) pairs, so the config stays hashable.
        interactions: add an InteractionCell (AND / OR / threshold models only) with `interaction_budget`
        evaluations per input.
    """

    measures: tuple[str, ...] = DEFAULT_MEASURES
    operators: tuple[str, ...] = DEFAULT_OPERATORS
    metrics: tuple[str, ...] = DEFAULT_METRIC_FAMILIES
    limit: int = 200
    seed: int = 0
    ffid_draws: int = 10
    random_sets: int = 20
    naopc_beam: int = 5
    truth_only: bool = False
    min_deciding: int = MIN_DECIDING
    self_explanations: tuple[str, ...] | None = None
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    measure_options: Mapping[str, Mapping[str, str]] | tuple = ()
    interactions: bool = False
    interaction_budget: int = DEFAULT_INTERACTION_BUDGET

    def __post_init__(self) -> None:
        # sequences as tuples and the options as sorted pairs: a config is a value (hashable, equal by content)
        for name in ("measures", "operators", "metrics"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.self_explanations is not None:
            object.__setattr__(self, "self_explanations", tuple(self.self_explanations))
        options = self.measure_options
        if isinstance(options, Mapping):
            options = tuple(sorted((str(m), tuple(sorted((str(k), str(v)) for k, v in opts.items())))
                                   for m, opts in options.items()))
        object.__setattr__(self, "measure_options", tuple(options))

    @classmethod
    def of(cls, config: CardConfig | None = None, **options) -> CardConfig:
        """`config` (default: the defaults) with `options` (CardConfig fields) replaced: what the entry points that
        take the options as keywords build. Refuses a name that is no option, listing those there are."""
        known = {f.name for f in fields(cls)}
        wrong = sorted(set(options) - known)
        if wrong:
            raise InvalidInputError(f"no report-card option {', '.join(wrong)}; the options: {', '.join(sorted(known))}")
        return cls(**options) if config is None else replace(config, **options)

    def options_of(self, measure: str) -> tuple[tuple[str, str], ...]:
        """The (option, value) pairs given for `measure`, sorted; () for its defaults."""
        return dict(self.measure_options).get(measure, ())

    def check(self) -> None:
        """Refuse what is wrong whatever the model: an unknown measure, an option given for a measure that is not
        scored or that the measure lacks, an unknown metric family or self-explanation kind (InvalidInputError,
        naming the valid ones)."""
        from engine.importance import MEASURES

        unknown = [m for m in self.measures if m not in MEASURES]
        if unknown:
            raise InvalidInputError(f"unknown measure(s) {', '.join(unknown)}; known: {', '.join(MEASURES)}")
        for m, opts in self.measure_options:
            if m not in self.measures:
                raise InvalidInputError(f"options given for {m!r}, which is not among the measures "
                                        f"({', '.join(self.measures)})")
            wrong = [k for k, _ in opts if k not in MEASURES[m].defaults]
            if wrong:
                raise InvalidInputError(f"{m} has no option {', '.join(wrong)}; its options: "
                                        f"{', '.join(MEASURES[m].defaults) or 'none'}")
        bad = [m for m in self.metrics if m not in card_families()]
        if bad:
            raise InvalidInputError(f"unknown metric(s) {', '.join(bad)}; use {', '.join(card_families())}")
        if self.self_explanations:
            check_kinds(self.self_explanations)


__all__ = ["DEFAULT_MEASURES", "DEFAULT_METRIC_FAMILIES", "DEFAULT_OPERATORS", "OPERATORS", "CardConfig"]
