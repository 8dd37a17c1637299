"""Planting into the user's own registered classifier and registered data: the variant is registered, the model is
fine-tuned from the user's classifier with the planted spec in its metadata, the truth is established by
intervention on it, and the report card either scores it or refuses it, as its truth says."""
from __future__ import annotations

import copy
import csv

import pytest

from engine.groundtruth import MechanismNotLearned, PlantSpec, establish_truth, plant_model


@pytest.fixture()
def users_model_and_data(models_cache, tmp_path, toy_classifier):
    from engine.data import get_dataset
    from engine.data.user_registry import register_dataset
    from engine.models import save_classifier

    save_classifier(copy.deepcopy(toy_classifier), "my-toy")
    toy = get_dataset("toy")
    path = tmp_path / "mine.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label", "split"])
        for split in ("train", "validation", "test"):
            for e in toy.split(split):
                w.writerow([e.primary, toy.classes[e.label], split])
    register_dataset("my-data", path, "text", "label", split_column="split")
    return "my-toy", "my-data"


def test_planting_into_the_users_registered_model_and_data_records_provenance_and_a_truth(users_model_and_data,
                                                                                           monkeypatch):
    model, data = users_model_and_data
    spec = PlantSpec(base_dataset=data, mechanism="trigger", words=("vessel",), rate=0.5, seed=0)
    planted = plant_model(spec, model, epochs=3, lr=3e-4, batch_size=16, model_id="my-toy-planted",
                          show_progress_bar=False)
    meta = planted.metadata
    assert meta["planted"]["mechanism"] == "trigger" and meta["planted"]["base_dataset"] == data
    assert meta["planted"]["model_kind"] == "classifier"  # the user's classifier was fine-tuned further
    assert meta["from_classifier"]["id"] == model
    assert meta["dataset"] == spec.variant_name()
    recipe = meta["planted"]["recipe"]["train"]
    assert 0.35 < recipe["with_decisive_words"] / recipe["n"] < 0.65

    from engine.models import load_classifier

    loaded = load_classifier("my-toy-planted")
    truth = establish_truth(loaded)
    assert truth.rates["insertion_flip"]["n"] > 0 and 0 <= truth.rates["insertion_flip"]["rate"] <= 1
    assert len(truth.deciding) == int(truth.inputs["decides"].sum())
    if truth.learned:
        truth.require_learned()
    else:
        with pytest.raises(MechanismNotLearned, match="did not learn"):
            truth.require_learned()

    # One report-card cell on its deciding inputs (thresholds lowered: the toy test split has 40 inputs).
    import engine.groundtruth.truth as truth_module
    from engine.groundtruth.card_cells import ReportCardCell
    from engine.groundtruth.card_compute import compute_card_cell
    from engine.groundtruth.card_plan import _WORKER_PLANS
    from engine.sweeps import CellContext

    monkeypatch.setattr(truth_module, "LEARNED_LOWER_BOUND", 0.0)
    _WORKER_PLANS.clear()
    # a precondition of the cell, asserted: the trigger at rate 0.5 on seed 0 leaves deciding inputs on the toy split
    # (a skip here hid a planting that decided nothing)
    assert len(establish_truth(loaded, min_deciding=1).deciding), "no deciding input on the toy split"
    result = compute_card_cell(ReportCardCell("my-toy-planted", "mask", "loo-sign", limit=4, min_deciding=1,
                                              metrics=("comprehensiveness", "randomisation")), CellContext())
    rows = result.rows
    assert set(rows["kind"]) == {"metric", "recovery"}
    assert rows["uid"].nunique() <= 4
    assert result.provenance["planted"]["words"] == ["vessel"]
    _WORKER_PLANS.clear()


def test_a_model_that_cannot_be_fine_tuned_is_refused_with_the_reason(models_cache):
    from engine.errors import NotApplicableError

    with pytest.raises(NotApplicableError, match="cannot fine-tune 'no-such-model'"):
        plant_model(PlantSpec(base_dataset="toy"), "no-such-model", show_progress_bar=False)
