"""One digest of a dataset's inputs (engine.data.dataset_sha256) and one of a prompt spec
(engine.models.prompt_digest.prompt_sha256), used by every key that depends on them: a MaSF fit's calibration key, a
prompted model's metadata, a planted model's stored truth. The values are pinned: fits and truths already on disk are
keyed by them, so a digest that changed would silently refit or re-establish everything (the pinned values are the
ones the formulas gave before they were moved here)."""
from __future__ import annotations

import pytest

from engine.data import dataset_sha256
from engine.models.prompt_digest import prompt_sha256
from engine.models.prompt_spec import PromptSpec

SPEC = {"instruction": "is the review positive or negative ?", "input_format": "review : {input}", "template": "plain",
        "answer_prefix": "answer :", "verbalizer": {"negative": ["bad"], "positive": ["good"]}}


@pytest.mark.parametrize(("args", "expected"), [(("toy", 0, "validation", None), "c104cc50de7f98a3"),
                                                (("toy", 0, "test", 5), "f3128224d8457e0e")])
def test_the_dataset_digest_of_a_split_is_the_one_stored_keys_were_made_with(args, expected):
    assert dataset_sha256(*args) == expected


def test_the_dataset_digest_sees_the_rows_not_the_name():
    """Fewer inputs of the same split, or another split, are other data: another digest."""
    assert len({dataset_sha256("toy", 0, "test", 5), dataset_sha256("toy", 0, "test", 4),
                dataset_sha256("toy", 0, "validation", 5)}) == 3


def test_the_prompt_digest_is_the_one_stored_keys_were_made_with_and_sees_every_field():
    spec = PromptSpec.from_dict(SPEC)
    assert prompt_sha256(spec) == "4394de8753c613cd"
    assert prompt_sha256(PromptSpec.from_dict({**SPEC, "answer_prefix": "sentiment :"})) != prompt_sha256(spec)
    assert prompt_sha256(None) is None  # a model that reads no prompt


def test_the_masf_key_and_the_truth_key_take_the_engines_digests(toy_classifier, monkeypatch):
    """The MaSF calibration key's data digest is engine.data's, and the planted truth's key reads the data digest from
    engine.data and the prompt digest and weights hash from the classifier (`Classifier.prompt_sha256`,
    `Classifier.weights_sha256`), not from helpers of its own: replacing them there changes the truth key."""
    from engine.groundtruth import truth_store
    from engine.ood import calibration_key

    key = calibration_key(toy_classifier, "toy")
    assert key.data_sha256 == dataset_sha256("toy", toy_classifier.meta.split_seed, "validation", None)
    assert key.prompt_sha256 is None

    import engine.data
    from engine.models.classifier import Classifier

    monkeypatch.setattr(engine.data, "dataset_sha256", lambda *args: "data-digest")
    monkeypatch.setattr(Classifier, "prompt_sha256", property(lambda self: "prompt-digest"))
    monkeypatch.setattr("engine.groundtruth.planting.planted_spec",
                        lambda classifier: type("Spec", (), {"base_dataset": "toy", "split_seed": 0, "to_dict": dict})())
    monkeypatch.setattr(Classifier, "weights_sha256", property(lambda self: "weights"))
    truth = truth_store.truth_key(toy_classifier)
    assert truth["inputs_sha256"] == "data-digest" and truth["prompt_sha256"] == "prompt-digest"
    assert truth["weights_sha256"] == "weights"
