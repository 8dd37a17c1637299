"""The report card's wiring for the set mechanisms on a real checkpoint: the toy tiny classifier saved as if planted
(graded-set, cancellation) and its card run as a sweep (`run_report_card`) into a temporary store, then read by the
separation and judge tables and printed by `report-card`.

A toy model does not learn a graded order in seconds, so its truth is established by intervention as always and
then every input is taken as deciding (learned forced): what is tested is that each measure cell stores one value per
deciding input of each separation statistic (at the word level, within its range), that the hard wrong explanations
are judged, and that the tables and the command read them with each statistic's best value, not the numbers."""
from __future__ import annotations

import numpy as np
import pytest
from card_stubs import as_planted, card_stubs  # noqa: F401 (card_stubs: a fixture)

from engine.groundtruth.mechanisms import WORD_POOL, PlantSpec

pytestmark = pytest.mark.usefixtures("one_thread")


def test_graded_set_card_stores_the_order_statistics_and_judges_the_swapped_orders(models_cache, tmp_path,
                                                                                  toy_classifier, card_stubs, capsys,  # noqa: F811 (the fixture)
                                                                                  monkeypatch):
    from engine.groundtruth import run_report_card
    from engine.groundtruth.card import card_store
    from engine.groundtruth.tables import judge_table, separation_summary, separation_table

    spec = PlantSpec(base_dataset="toy", mechanism="graded-set", words=WORD_POOL[:3], strengths=(0.95, 0.7, 0.5))
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path))  # the command's store: <results>/groundtruth
    truth = as_planted(card_stubs, toy_classifier, spec, "toy-graded-set")
    n = min(8, len(truth.deciding))
    report = run_report_card("toy-graded-set", run="set", measures=("loo-sign", "grad-l2"), operators=("mask",),
                             metrics=("comprehensiveness",), limit=8, min_deciding=1)
    assert not report.failed, report.failed
    data = card_store().load("set")
    rec = data[(data["kind"] == "recovery") & (data["measure"] == "loo-sign")]
    for statistic in ("order-spearman", "order-kendall", "set-top-share", "set-mass-share"):
        v = rec.loc[rec["metric"] == statistic, "value"].to_numpy(float)
        assert len(v) == n and np.isfinite(v).all(), statistic
        assert ((v >= -1) & (v <= 1)).all() if statistic.startswith("order") else ((v >= 0) & (v <= 1)).all()
    table = separation_table(data)
    assert set(table["measure"]) == {"loo-sign", "grad-l2"} and (table["best"] == 1.0).all()
    assert separation_summary(data).iloc[0]["statistic"] == "order-spearman"
    wrongs = set(judge_table(data)["wrong"])
    assert {"adjacent-swapped", "weakest-first", "strongest-other-first", "all"} <= wrongs

    from engine.cli import main

    assert main(["report-card", "--model", "toy-graded-set", "--run", "set-cli", "--measures", "loo-sign", "grad-l2",
                 "--operator", "mask", "--metrics", "comprehensiveness", "--limit", "8", "--min-deciding", "1"]) == 0
    out = capsys.readouterr().out
    assert "order-spearman" in out and "best 1.00" in out and "order check" in out


def test_cancellation_card_checks_each_words_sign_and_judges_the_flipped_sign(models_cache, tmp_path, toy_classifier,
                                                                             card_stubs):  # noqa: F811 (the fixture)
    from engine.groundtruth import run_report_card
    from engine.groundtruth.card import card_store
    from engine.groundtruth.tables import judge_table

    spec = PlantSpec(base_dataset="toy", mechanism="cancellation", words=("vessel", "orbit"))
    as_planted(card_stubs, toy_classifier, spec, "toy-cancellation")
    report = run_report_card("toy-cancellation", run="c", measures=("loo-sign", "grad-l2"), operators=("mask",),
                             metrics=("comprehensiveness",), limit=6, min_deciding=1, results_dir=tmp_path)
    assert not report.failed, report.failed
    data = card_store(tmp_path).load("c")
    rec = data[data["kind"] == "recovery"]
    grad = rec[(rec["measure"] == "grad-l2") & (rec["metric"] == "signs-both")]["value"].to_numpy(float)
    # grad-l2 is never negative: the opposing word never gets its sign, so both signs are never right
    assert len(grad) and (grad == 0).all()
    loo = rec[(rec["measure"] == "loo-sign") & (rec["metric"] == "signs-both")]["value"].to_numpy(float)
    assert len(loo) == len(grad) and set(np.unique(loo)) <= {0.0, 1.0}
    assert "sign-flipped" in set(judge_table(data)["wrong"])
