"""The report card's randomisation test and Sensitivity-n on the hand-built planted model of
test_groundtruth_min_deciding: the true explanation (all its mass on the planted word) passes the randomisation test
on every deciding input now that random sets never draw its own set (before, a random set that drew the planted word
tied it and kept p above 0.05 on a share of the inputs), and Sensitivity-n goes through the card as a registry family
with the registry's direction on its per-level rows and its mean."""
from __future__ import annotations

import numpy as np
import pytest
from card_stubs import card_on_handbuilt, card_stubs  # noqa: F401 (card_stubs: a fixture)
from test_groundtruth_min_deciding import MODEL, N_DECIDING, planted  # noqa: F401  (the hand-built planted model beside this file)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_true_explanation_passes_the_cards_randomisation_test_on_every_input(planted, monkeypatch):  # noqa: F811

    from engine.faithfulness.randomisation import p_value_floor
    from engine.faithfulness.registry import better
    from engine.groundtruth.card_cells import ReportCardCell
    from engine.groundtruth.card_compute import compute_card_cell
    from engine.sweeps import CellContext

    card_on_handbuilt(monkeypatch)  # no MaSF; the planted word found by its id
    cell = ReportCardCell(model=MODEL, operator="mask", explanation="explanation:true", limit=8,
                          metrics=("randomisation", "sensitivity-n"), min_deciding=N_DECIDING, random_sets=40)
    rows = compute_card_cell(cell, CellContext("test", None, None)).rows
    test = rows[rows["metric"] == "randomisation-win-rate"]
    assert len(test) > 0
    np.testing.assert_allclose(test["p_value"], p_value_floor(40))
    assert (test["value"] == 1.0).all()
    per_n = rows[rows["metric"].str.startswith("sensitivity-n")]
    assert {"sensitivity-n@0.1", "sensitivity-n@0.5", "sensitivity-n-mean"} <= set(per_n["metric"])
    for name, g in per_n.groupby("metric"):
        assert set(g["better"]) == {better(name)}, name
