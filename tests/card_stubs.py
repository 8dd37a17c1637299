"""Models and truths handed to the report card by id in a test.

The card plans a model (engine.groundtruth.card_plan.plan_card) by loading it (`engine.models.load_classifier`) and
reading its truth (`engine.groundtruth.truth_store.load_or_establish_truth`); the `card_stubs` fixture answers both
for the ids it holds (any other id is loaded and established as always) and forgets the plans this process built
(`plan_of`'s) before and after the test, so a plan of one test's stand-in never serves another's."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest


@dataclass
class CardStubs:
    """classifiers: model id -> the classifier loaded for it; truths: model id -> its truth (any seed and
    min_deciding)."""

    classifiers: dict = field(default_factory=dict)
    truths: dict = field(default_factory=dict)


@pytest.fixture()
def card_stubs(monkeypatch):
    import engine.models
    from engine.groundtruth import truth_store
    from engine.groundtruth.card_plan import _WORKER_PLANS

    stubs = CardStubs()
    load, establish = engine.models.load_classifier, truth_store.load_or_establish_truth
    monkeypatch.setattr(engine.models, "load_classifier",
                        lambda model, *a, **k: stubs.classifiers[model] if model in stubs.classifiers
                        else load(model, *a, **k))
    monkeypatch.setattr(truth_store, "load_or_establish_truth",
                        lambda classifier, *a, **k: stubs.truths[classifier.id] if classifier.id in stubs.truths
                        else establish(classifier, *a, **k))
    _WORKER_PLANS.clear()
    yield stubs
    _WORKER_PLANS.clear()


def as_planted(stubs: CardStubs, classifier, spec, model_id: str):
    """`classifier` (e.g. the toy one) saved as `model_id` as if planted with `spec` (its variant registered), its
    truth established by intervention and every input taken as deciding (learned forced: a toy model does not learn
    a mechanism in seconds); both handed to the card through `stubs`. Returns the truth."""
    import copy
    import dataclasses

    from engine.groundtruth import establish_truth, register_variant
    from engine.models import load_classifier, save_classifier

    name = register_variant(spec)
    clf = copy.deepcopy(classifier)
    clf.metadata["planted"] = {**spec.to_dict(), "dataset": name}
    clf.metadata["dataset"] = name
    save_classifier(clf, model_id)
    loaded = load_classifier(model_id)
    truth = establish_truth(loaded, min_deciding=1)
    truth.inputs["decides"] = True
    truth = dataclasses.replace(truth, learned=True)
    stubs.classifiers[model_id] = loaded
    stubs.truths[model_id] = truth
    return truth


def card_on_handbuilt(monkeypatch, word: str = "trig") -> None:
    """The card computed for a hand-built planted model (tests/handbuilt_models.py): without MaSF (its shares are
    NaN), and with the planted `word` found by its id, as the hand-built tokenizer only maps ids to words."""
    import torch
    from handbuilt_models import VOCAB

    import engine.groundtruth.card_compute as card_compute
    import engine.ood

    monkeypatch.setattr(engine.ood, "load_or_fit_masf", lambda classifier, dataset: None)
    monkeypatch.setattr(card_compute, "planted_positions", lambda classifier, batch, spec: (
        (batch.input_ids == VOCAB[word]) & batch.maskable, torch.zeros_like(batch.maskable)))
