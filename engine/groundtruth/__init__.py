"""Ground truth for faithfulness (REFERENCE.md section 15): planted mechanisms as dataset variants, the truth
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

__all__ = ["DEFAULT_WORDS", "MECHANISMS", "PlantSpec", "check_words", "plant_model", "planted_dataset",
           "planted_spec", "register_variant"]
