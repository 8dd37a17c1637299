"""The report card's plan (engine/groundtruth/card_plan.py) is built once per model and handed to its cells: a card
of several cells loads the model, reads its planted spec and hashes its weights once, and every cell records that
hash. On the hand-built planted model of test_groundtruth_min_deciding (12 deciding inputs)."""
from __future__ import annotations

import pytest
from card_stubs import card_on_handbuilt, card_stubs  # noqa: F401 (card_stubs: a fixture)
from test_groundtruth_min_deciding import MODEL, N_DECIDING, planted  # noqa: F401 (the hand-built planted model)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_card_of_several_cells_resolves_its_model_once(planted, card_stubs, tmp_path, monkeypatch):  # noqa: F811

    import engine.groundtruth.planting as planting
    import engine.models
    from engine.groundtruth import run_report_card

    card_on_handbuilt(monkeypatch)  # no MaSF; the planted word found by its id
    loads, specs, hashes = [], [], []
    load, read_spec = engine.models.load_classifier, planting.planted_spec
    monkeypatch.setattr(engine.models, "load_classifier", lambda model, *a, **k: loads.append(model) or load(model))
    monkeypatch.setattr(planting, "planted_spec", lambda classifier: specs.append(classifier.id) or read_spec(classifier))
    # the weights' identity, read once from the classifier (Classifier.weights_sha256) and recorded by every cell
    monkeypatch.setattr(type(planted), "weights_sha256", property(lambda self: hashes.append(self.id) or "the-weights"))

    report = run_report_card(MODEL, measures=(), operators=("mask", "delete"),
                             metrics=("comprehensiveness",), limit=5, min_deciding=N_DECIDING, results_dir=tmp_path)
    assert not report.failed, report.failed
    assert len(report.done) >= 5  # the truth, and per operator each constructed explanation (true, hard wrong ones)
    assert (len(loads), len(specs), len(hashes)) == (1, 1, 1)
    from engine.groundtruth.card import card_store

    records = card_store(tmp_path).provenance(report.run)
    assert len(records) == len(report.done) and {r["provenance"]["checkpoint_sha256"] for r in records} == {"the-weights"}
