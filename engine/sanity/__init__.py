"""Sanity checks of importance measures (docs/methods.md#sanity-checks-and-cost): does a measure explain the model or the input?

    cascading_randomisation(classifier, measures, batch)   # Adebayo et al. 2018, model randomisation
    label_randomisation(classifier, randomised, measures, batch)   # the same encoder trained on permuted labels
    random_logit(classifier, measures, batch)   # Sixt et al. 2020, the same model explaining another class
"""
from engine.sanity.labels import label_randomisation, train_label_randomised
from engine.sanity.random_logit import random_logit
from engine.sanity.randomisation import (
    PASS_THRESHOLD,
    cascading_randomisation,
    randomisation_stages,
    rank_similarity,
    sanity_summary,
)

__all__ = ["PASS_THRESHOLD", "cascading_randomisation", "label_randomisation", "random_logit", "randomisation_stages", "rank_similarity",
           "sanity_summary", "train_label_randomised"]
