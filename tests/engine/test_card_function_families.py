"""The report card computes a registry family that has a function of its own (here the properties and faithfulness
correlation) beside the kernel's, with the registry's direction on every row: a family added to the registry is
scored by the card without an edit to the card. On the hand-built planted model of test_groundtruth_min_deciding."""
from __future__ import annotations

import pytest
from card_stubs import card_on_handbuilt, card_stubs  # noqa: F401 (card_stubs: a fixture)
from test_groundtruth_min_deciding import MODEL, N_DECIDING, planted  # noqa: F401  (the hand-built planted model beside this file)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_card_cell_scores_function_families_with_the_registrys_direction(planted, monkeypatch):  # noqa: F811

    from engine.faithfulness.registry import better
    from engine.groundtruth.card_cells import ReportCardCell
    from engine.groundtruth.card_compute import compute_card_cell
    from engine.sweeps import CellContext

    card_on_handbuilt(monkeypatch)  # no MaSF; the planted word found by its id
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
