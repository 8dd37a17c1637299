"""A prompted language model's default measures leave IG out: its passes over the whole prompt took 45-133 CPU-s
a sentence on SmolLM2 (the page's four defaults 112 s), where the three others take about 10 s together. Encoders
keep the four."""
from __future__ import annotations

from engine.cli.explain import _chosen_measures
from engine.explain import LIVE_MEASURES, PROMPTED_LIVE_MEASURES, default_measures
from engine.models import Classifier
from engine.models.prompted import PromptedClassifier


def _bare(cls):
    return object.__new__(cls)  # the defaults depend on the kind of model only: nothing to load


def test_an_encoder_gets_the_four_live_measures():
    assert default_measures(_bare(Classifier)) == LIVE_MEASURES
    assert "ig-sign" in LIVE_MEASURES


def test_a_prompted_lm_gets_the_cheap_three_without_ig():
    chosen = default_measures(_bare(PromptedClassifier))
    assert chosen == PROMPTED_LIVE_MEASURES and "ig-sign" not in chosen
    assert set(chosen) < set(LIVE_MEASURES)


def test_the_cli_live_bundle_follows_the_model_kind():
    assert _chosen_measures(["live"], _bare(PromptedClassifier)) == list(PROMPTED_LIVE_MEASURES)
    assert _chosen_measures(["live"], _bare(Classifier)) == list(LIVE_MEASURES)
