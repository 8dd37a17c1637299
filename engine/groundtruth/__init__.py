"""Ground truth for faithfulness (docs/ground-truth.md): planted mechanisms as dataset variants, the truth
established by intervention on the planted model (flip rates), and the report card that scores every importance
measure, faithfulness metric and masking operator against it.

    from engine.groundtruth import CardConfig, PlantSpec, plant_model, establish_truth, run_report_card
    spec = PlantSpec(base_dataset="rt", mechanism="graded", words=("vessel",), rate=0.3, q=0.8, seed=0)
    classifier = plant_model(spec, "tiny")              # masked fine-tuning; metadata['planted'] = spec
    truth = establish_truth(classifier)                 # flip rates with Wilson CIs, deciding inputs
    report = run_report_card(classifier.id, CardConfig(limit=50), run="tiny-rt-card")

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
from engine.lazy_exports import lazy_face

# The card and its tables import the faithfulness metrics (torch): imported lazily by name.
_LAZY = {
    **dict.fromkeys(("CardConfig", "DEFAULT_MEASURES", "DEFAULT_METRIC_FAMILIES", "DEFAULT_OPERATORS", "OPERATORS"),
                    "engine.groundtruth.card_config"),
    **dict.fromkeys(("CardPlan", "plan_card", "operator_classifier", "supported_operators"),
                    "engine.groundtruth.card_plan"),
    **dict.fromkeys(("ReportCardCell", "TruthCell", "InteractionCell", "card_cells"), "engine.groundtruth.card_cells"),
    **dict.fromkeys(("card_store", "run_report_card"), "engine.groundtruth.card"),
    **dict.fromkeys(("SelfExplanationCell", "SELF_KINDS"), "engine.groundtruth.selfexplain_card"),
    **dict.fromkeys(("truth_table", "recovery_table", "judge_table", "spearman_table", "separation_table",
                     "separation_summary", "operator_table", "verdicts"), "engine.groundtruth.tables"),
}


__getattr__, __dir__ = lazy_face(__name__, _LAZY, cache=False)


__all__ = ["DEFAULT_WORDS", "MECHANISMS", "MechanismNotLearned", "PlantSpec", "Truth", "check_words",
           "establish_truth", "plant_model", "planted_dataset", "planted_spec", "register_variant", *_LAZY]
