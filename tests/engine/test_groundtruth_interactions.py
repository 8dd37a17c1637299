"""Interaction recovery on the report card (engine/groundtruth/interactions.py, card.InteractionCell, tables.
interaction_table, report-card --interactions): the statistics on hand-built AND / OR models whose interactions are
exact, the table's CIs and best values on rows made by hand, and the opt-in cell run as a sweep on the toy model saved
as if planted (the numbers there mean nothing: the wiring is what is tested)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from card_stubs import as_planted, card_stubs  # noqa: F401 (card_stubs: a fixture)
from handbuilt_models import VOCAB, batch_of, handbuilt

from engine.errors import NotApplicableError
from engine.groundtruth.interactions import expected_sign, interaction_recovery
from engine.groundtruth.mechanisms import PlantSpec

pytestmark = pytest.mark.usefixtures("one_thread")
TEXTS = ["the trig film pair plot", "trig was pair", "pair the film trig"]


def _ordered(batch, words):
    return [batch.input_ids == VOCAB[w] for w in words]


@pytest.mark.parametrize(("head", "mechanism", "value"), [("and", "and", 3.0), ("or", "or", -3.0)])
def test_the_planted_pair_is_the_top_pair_with_theorys_sign(head, mechanism, value):
    """AND: the pair's interaction is +k on every input, OR -k; every other pair 0: the top pair is the planted one
    (rank 1) and its sign the expected one, on each input."""
    spec = PlantSpec(mechanism=mechanism, words=("trig", "pair"))
    batch = batch_of(TEXTS)
    found, options = interaction_recovery(handbuilt(head), batch, torch.ones(3, dtype=torch.long),
                                          _ordered(batch, spec.words), spec, budget=64, index="k-SII", seed=0)
    assert options["level"] == "word" and options["budget"] == 64
    np.testing.assert_array_equal(found["pair-top"], [1, 1, 1])
    np.testing.assert_array_equal(found["pair-sign"], [1, 1, 1])
    np.testing.assert_array_equal(found["pair-rank"], [1, 1, 1])
    np.testing.assert_allclose(found["pair-value"], [value] * 3, atol=1e-5)


def test_a_model_without_the_interaction_fails_the_statistics():
    """The linear model has no interaction at all: the planted pair's value is 0, so its sign is never the expected
    one (the statistic can fail)."""
    spec = PlantSpec(mechanism="and", words=("trig", "pair"))
    batch = batch_of(TEXTS[:1])
    found, _ = interaction_recovery(handbuilt("linear"), batch, torch.ones(1, dtype=torch.long),
                                    _ordered(batch, spec.words), spec, budget=64, index="k-SII", seed=0)
    assert abs(found["pair-value"][0]) < 1e-5 and found["pair-sign"][0] == 0.0


def test_an_input_without_a_planted_word_gets_nan():
    spec = PlantSpec(mechanism="or", words=("trig", "pair"))
    batch = batch_of(["the trig film", "trig pair"])
    found, _ = interaction_recovery(handbuilt("or"), batch, torch.ones(2, dtype=torch.long),
                                    _ordered(batch, spec.words), spec, budget=64, index="k-SII", seed=0)
    assert np.isnan(found["pair-top"][0]) and found["pair-top"][1] == 1.0


def test_expected_signs_and_the_refusal():
    assert expected_sign(PlantSpec(mechanism="and", words=("a", "b"))) == 1
    assert expected_sign(PlantSpec(mechanism="or", words=("a", "b"))) == -1
    assert expected_sign(PlantSpec(mechanism="threshold", words=("a", "b", "c", "d"), m=2)) == 0
    assert expected_sign(PlantSpec(mechanism="threshold", words=("a", "b", "c"), m=3)) == 1
    with pytest.raises(NotApplicableError, match="and / or / threshold"):
        expected_sign(PlantSpec(mechanism="trigger", words=("a",)))


def _rows(model, mechanism, better, stats: dict[str, list[float]]):
    rows = []
    for metric, values in stats.items():
        for i, v in enumerate(values):
            rows.append({"model": model, "mechanism": mechanism, "words": "a b", "method": "interaction-recovery",
                         "kind": "interaction", "metric": metric, "uid": str(i), "value": v,
                         "better": better if metric == "pair-value" else "higher"})
    return rows


def test_the_table_gives_shares_with_wilson_cis_and_states_the_threshold_gives_no_sign():
    from engine.groundtruth.tables import interaction_table
    from engine.stats import wilson_ci

    df = pd.DataFrame(_rows("m-and", "and", "higher", {"pair-top": [1, 1, 0, 1], "pair-sign": [1, 1, 1, 0],
                                                         "pair-value": [2.0, 1.0, 0.5, -0.5], "pair-rank": [1, 1, 3, 1]})
                      + _rows("m-th", "threshold", "zero", {"pair-top": [0, 1], "pair-sign": [np.nan, np.nan],
                                                             "pair-value": [0.1, -0.1], "pair-rank": [2, 1]}))
    table = interaction_table(df).set_index("model")
    a = table.loc["m-and"]
    assert a["expected"] == "+" and a["n"] == 4 and a["top_pair"] == 0.75 and a["sign"] == 0.75
    assert (a["top_pair_low"], a["top_pair_high"]) == pytest.approx(wilson_ci(3, 4))
    assert a["value"] == pytest.approx(0.75) and a["rank"] == pytest.approx(1.5)
    assert a["top_pair_best"] == 1.0 and a["sign_best"] == 1.0 and a["rank_best"] == 1.0
    t = table.loc["m-th"]
    assert t["expected"] == "0" and np.isnan(t["sign"]) and t["top_pair"] == 0.5


def test_the_opt_in_cell_runs_on_the_card_and_leaves_the_other_cells_keys(models_cache, tmp_path, toy_classifier,
                                                                         card_stubs, capsys, monkeypatch):  # noqa: F811 (the fixture)
    from engine.cli import main
    from engine.groundtruth import run_report_card
    from engine.groundtruth.card import card_store
    from engine.groundtruth.card_cells import InteractionCell, card_cells
    from engine.groundtruth.tables import interaction_table
    from engine.reports.groundtruth_tables import interaction_markdown

    spec = PlantSpec(base_dataset="toy", mechanism="and", words=("vessel", "orbit"))
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path))
    truth = as_planted(card_stubs, toy_classifier, spec, "toy-and")
    options = dict(measures=("loo-sign",), operators=("mask",), metrics=("comprehensiveness",), limit=5, min_deciding=1)
    plain = card_cells("toy-and", **options)
    opted = card_cells("toy-and", **options, interactions=True, interaction_budget=64)
    assert not any(isinstance(c, InteractionCell) for c in plain)
    assert [c.key() for c in opted if not isinstance(c, InteractionCell)] == [c.key() for c in plain]
    (cell,) = [c for c in opted if isinstance(c, InteractionCell)]
    assert cell.key()["kind"] == "interaction-recovery" and cell.key()["budget"] == 64

    report = run_report_card("toy-and", run="pairs", measures=("loo-sign",), operators=("mask",),
                             metrics=("comprehensiveness",), limit=5, min_deciding=1, interactions=True,
                             interaction_budget=64)
    assert not report.failed, report.failed
    data = card_store().load("pairs")
    rows = data[data["method"] == "interaction-recovery"]
    n = min(5, len(truth.deciding))
    assert set(rows["metric"]) == {"pair-top", "pair-sign", "pair-value", "pair-rank"}
    top = rows.loc[rows["metric"] == "pair-top", "value"].to_numpy(float)
    assert len(top) == n and set(np.unique(top[~np.isnan(top)])) <= {0.0, 1.0}
    table = interaction_table(data)
    assert list(table["model"]) == ["toy-and"] and table.iloc[0]["expected"] == "+"
    assert "| toy-and | and (vessel orbit) |" in interaction_markdown("pairs")(tmp_path)

    assert main(["report-card", "--model", "toy-and", "--run", "pairs-cli", "--measures", "loo-sign", "--operator", "mask",
                 "--metrics", "comprehensiveness", "--limit", "5", "--min-deciding", "1", "--interactions",
                 "--interaction-budget", "64"]) == 0
    out = capsys.readouterr().out
    assert "interactions toy-and (and): top pair is the planted pair" in out and "expected sign +" in out
