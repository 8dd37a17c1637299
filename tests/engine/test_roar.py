"""ROAR / Recursive ROAR with retraining on the toy set with the tiny model."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from engine.data import get_dataset
from engine.faithfulness.roar import roar_curve
from engine.models import TrainConfig, apply_token_masks

POLARITY = {"good", "great", "wonderful", "fun", "brilliant", "lovely", "bad", "awful", "boring", "dull", "terrible", "poor"}


class OracleExplainer:
    """Scores the toy set's polarity words 1 and everything else 0: the ground truth of what decides the label."""

    def __init__(self, classifier):
        self.classifier = classifier
        self.calls = 0
        vocab = classifier.tokenizer.get_vocab()
        self.polar_ids = torch.tensor([vocab[w] for w in POLARITY if w in vocab])

    def attribute(self, batch, target=None):
        self.calls += 1
        scores = torch.isin(batch.input_ids, self.polar_ids.to(batch.device)).float()
        return SimpleNamespace(scores=scores + 0.01 * torch.rand(scores.shape), maskable=batch.maskable)


def test_masks_are_applied_by_uid_and_never_touch_specials(toy_classifier):
    rows = get_dataset("toy").split("test")[:2]
    batch = toy_classifier.batch_of(rows)
    masked = apply_token_masks(batch, [e.uid for e in rows], {rows[0].uid: [0, 1, 2]}, toy_classifier.mask_token_id)
    assert (masked.input_ids[0, 1:3] == toy_classifier.mask_token_id).all()
    assert masked.input_ids[0, 0] != toy_classifier.mask_token_id, "position 0 is [CLS]: never masked"
    assert torch.equal(masked.input_ids[1], batch.input_ids[1])


def test_removing_the_true_evidence_destroys_what_retraining_can_recover(toy_classifier):
    config = TrainConfig(base_model="tiny", dataset="toy", epochs=3, lr=3e-4, batch_size=16, seed=0)
    made = []

    def factory(classifier):
        made.append(OracleExplainer(classifier))
        return made[-1]

    oracle = roar_curve(config, "oracle", recursive=True, levels=[0.5], explainer_factory=factory, base_classifier=toy_classifier)
    assert oracle["values"][0] >= 0.9
    # half the tokens of every toy sentence covers its polarity words: nothing is left to learn from
    assert oracle["values"][1] <= 0.7, oracle
    roar = roar_curve(config, "oracle", recursive=False, levels=[0.25, 0.5], explainer_factory=factory, base_classifier=toy_classifier)
    assert len(roar["values"]) == 3 and roar["masked_fraction"][2] > roar["masked_fraction"][1] > 0
    assert made[-1].calls == len(range(0, 320, 64)) + 1 + 1, "ROAR explains each example once, with the level-0 model"
