"""Ground truth for faithfulness (docs/ground-truth.md): planted mechanisms as dataset variants, the truth
established by intervention on the planted model (flip rates), and the report card that scores every importance
measure, faithfulness metric and masking operator against it.

    from engine.groundtruth import PlantSpec, plant_model, establish_truth, run_report_card
    spec = PlantSpec(base_dataset="rt", mechanism="graded", words=("vessel",), rate=0.3, q=0.8, seed=0)
    classifier = plant_model(spec, "tiny")              # masked fine-tuning; metadata['planted'] = spec
    truth = establish_truth(classifier)                 # flip rates with Wilson CIs, deciding inputs
    report = run_report_card(classifier.id, run="tiny-rt-card")

Layer: above engine.faithfulness, engine.selfexplain and engine.sweeps; below engine.reports and engine.cli.
"""
from __future__ import annotations

from engine.groundtruth.mechanisms import (
    DEFAULT_WORDS,
    MECHANISMS,
    PlantSpec,
    check_words,
    planted_dataset,
)
from engine.groundtruth.planting import plant_model, planted_spec, register_variant
from engine.groundtruth.truth import MechanismNotLearned, Truth, establish_truth

# The card and its tables import the faithfulness metrics (torch): imported lazily by name.
_LAZY = {
    "ReportCardCell": "engine.groundtruth.card", "TruthCell": "engine.groundtruth.card",
    "card_cells": "engine.groundtruth.card", "card_store": "engine.groundtruth.card",
    "run_report_card": "engine.groundtruth.card", "operator_classifier": "engine.groundtruth.card",
    "supported_operators": "engine.groundtruth.card", "DEFAULT_MEASURES": "engine.groundtruth.card",
    "DEFAULT_OPERATORS": "engine.groundtruth.card", "DEFAULT_METRIC_FAMILIES": "engine.groundtruth.card",
    "OPERATORS": "engine.groundtruth.card",
    "SelfExplanationCell": "engine.groundtruth.selfexplain_card", "SELF_KINDS": "engine.groundtruth.selfexplain_card",
    "truth_table": "engine.groundtruth.tables", "recovery_table": "engine.groundtruth.tables",
    "judge_table": "engine.groundtruth.tables", "spearman_table": "engine.groundtruth.tables",
    "separation_table": "engine.groundtruth.tables", "separation_summary": "engine.groundtruth.tables",
    "operator_table": "engine.groundtruth.tables", "verdicts": "engine.groundtruth.tables",
}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'engine.groundtruth' has no attribute {name!r}")


__all__ = ["DEFAULT_WORDS", "MECHANISMS", "MechanismNotLearned", "PlantSpec", "Truth", "check_words",
           "establish_truth", "plant_model", "planted_dataset", "planted_spec", "register_variant", *_LAZY]
