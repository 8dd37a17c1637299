"""The report card computes a registry family that has a function of its own (here the properties and faithfulness
correlation) beside the kernel's, with the registry's direction on every row: a family added to the registry is
scored by the card without an edit to the card. On the hand-built planted model of test_groundtruth_min_deciding."""
from __future__ import annotations

import pytest
import torch
from card_stubs import card_stubs  # noqa: F401 (a fixture)
from test_groundtruth_min_deciding import MODEL, N_DECIDING, planted  # noqa: F401  (the hand-built planted model beside this file)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_card_cell_scores_function_families_with_the_registrys_direction(planted, monkeypatch):  # noqa: F811
    from handbuilt_models import VOCAB

    import engine.groundtruth.card_compute as card
    import engine.ood
    from engine.faithfulness.registry import better
    from engine.groundtruth.card_cells import ReportCardCell
    from engine.groundtruth.card_compute import compute_card_cell
    from engine.sweeps import CellContext

    monkeypatch.setattr(engine.ood, "load_or_fit_masf", lambda classifier, dataset: None)  # no MaSF: shares NaN
    # the hand-built tokenizer only maps ids to words: the planted word is found by its id
    monkeypatch.setattr(card, "planted_positions", lambda classifier, batch, spec: (
        (batch.input_ids == VOCAB["trig"]) & batch.maskable, torch.zeros_like(batch.maskable)))
    cell = ReportCardCell(model=MODEL, operator="mask", explanation="explanation:true", limit=5,
                          metrics=("comprehensiveness", "properties", "faithfulness-correlation"),
                          min_deciding=N_DECIDING)
    rows = compute_card_cell(cell, CellContext("test", None, None)).rows
    metrics = set(rows["metric"])
    assert {"sparseness", "complexity", "faithfulness-correlation", "comprehensiveness@0.1"} <= metrics
    assert "deletion-area" not in metrics  # only the families asked for
    for name, g in rows.groupby("metric"):
        assert set(g["better"]) == {better(name)}, name
    assert len(rows[rows["metric"] == "faithfulness-correlation"]) == 5
