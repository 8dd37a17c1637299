"""`python -m engine rationales`: per-input AUPRC against bAbI's supporting facts, stored with provenance, and the
faithfulness-against-plausibility view and report table that read the shipped run."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import run_command, save_for_commands

from engine.errors import InvalidInputError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def saved_babi(babi_classifier, models_cache, tmp_path, monkeypatch):
    return save_for_commands(babi_classifier, "babi-masked-s0", tmp_path, monkeypatch)


def test_rationales_command_stores_per_input_auprc_equal_to_the_supporting_fact_metrics_and_resumes(
        saved_babi, babi_classifier, tmp_path, capsys):
    """Per input and measure one AUPRC and token-F1 row, with provenance; explaining the predicted class, the mean
    AUPRC over inputs equals `supporting_fact_metrics` (the annotation path) on the same inputs; a second run
    computes nothing."""
    from engine.data import get_dataset
    from engine.plausibility import supporting_fact_metrics
    from engine.plausibility.rationale_runs import by_measure, load_rationales, rationale_store

    measures = ["random", "grad-l2", "loo-sign"]
    argv = ["--model", saved_babi, "--dataset", "babi-1", "--measures", *measures, "--limit", "6",
            "--target", "predicted", "--run", "t"]
    assert run_command("rationales", argv) == 0
    store = rationale_store()
    assert store.root == tmp_path / "results" / "rationales"
    entries = store.provenance("t")
    assert len(entries) == 3
    prov = entries[0]["provenance"]
    assert prov["command"].startswith("python -m engine rationales --model babi-masked-s0")
    assert prov["checkpoint_sha256"] and prov["code_version"] and prov["n_examples"] == 6
    rows = load_rationales("t")
    assert len(rows) == 3 * 6 * 2 and set(rows["metric"]) == {"auprc", "token-f1"}
    assert rows["value"].dropna().between(0, 1).all()
    dataset = get_dataset("babi-1", babi_classifier.metadata.get("split_seed", 0))
    reference = {r["measure"]: r for r in supporting_fact_metrics(babi_classifier, dataset, measures, limit=6)}
    table = by_measure(rows).set_index("measure")
    for m in measures:
        assert table.loc[m, "value"] == pytest.approx(reference[m]["auprc"], abs=1e-9)
        assert table.loc[m, "n"] == reference[m]["n_auprc"]
        assert table.loc[m, "low"] <= table.loc[m, "value"] <= table.loc[m, "high"]
    assert run_command("rationales", argv) == 0
    assert "0 cells computed, 3 already in the store" in capsys.readouterr().out


def test_rationales_refuse_a_dataset_without_supporting_facts(toy_classifier, models_cache, tmp_path, monkeypatch):
    """A dataset with no rationale spans is refused with the datasets that have them, and nothing is stored."""
    from engine.models import save_classifier
    from engine.plausibility.rationale_runs import rationale_store

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    save_classifier(toy_classifier, "toy-s0", overwrite=True)
    with pytest.raises(InvalidInputError, match="babi-1"):
        run_command("rationales", ["--model", "toy-s0", "--dataset", "toy", "--measures", "grad-l2", "--limit", "3", "--run", "t"])
    assert rationale_store().runs() == []


def test_auprc_interval_is_over_inputs_with_each_input_averaged_over_seeds_first():
    """n counts inputs (not input-seed pairs): two seeds of 4 inputs give n = 4 and the mean of the per-input means."""
    from engine.plausibility.rationale_runs import by_measure

    values = {0: [1.0, 0.5, 0.2, 0.8], 1: [0.6, 0.5, 0.4, 0.0]}
    rows = pd.DataFrame([{"measure": "m", "seed": s, "step": i, "metric": "auprc", "value": v}
                         for s, vs in values.items() for i, v in enumerate(vs)])
    row = by_measure(rows).iloc[0]
    assert row["n"] == 4 and row["seeds"] == 2
    assert row["value"] == pytest.approx(np.mean([0.8, 0.5, 0.3, 0.4]))
    assert row["low"] <= row["value"] <= row["high"]


def test_the_view_reads_the_shipped_babi_run_with_numbers_and_ordered_intervals_on_both_axes():
    """Out of the box (the shipped results/), the faithfulness-against-plausibility view has RACU and gold AUPRC for
    the same measures of the same checkpoints, every interval ordered low <= value <= high."""
    from app.faith_plausibility import joined, racu_by_measure, shipped_pairing, spearman

    racu_rows, plaus = shipped_pairing(ROOT / "results")
    assert not racu_rows.empty and not plaus.empty
    both = joined(racu_by_measure(racu_rows), plaus)
    assert len(both) >= 8, "every measure of the run but random, on both axes"
    assert both[["faith", "faith_low", "faith_high", "plaus", "plaus_low", "plaus_high"]].notna().all().all()
    assert ((both["faith_low"] <= both["faith"]) & (both["faith"] <= both["faith_high"])).all()
    assert ((both["plaus_low"] <= both["plaus"]) & (both["plaus"] <= both["plaus_high"])).all()
    assert (both["faith_n"] == 3).all() and (both["plaus_n"] >= 100).all()
    assert not math.isnan(spearman(both))


def test_the_report_table_states_spearman_with_n_for_the_shipped_runs():
    """The docs' table is built from the shipped runs: a row per measure and the rank correlation with its n."""
    from app.faith_plausibility import SHIPPED_RACU_RUN, SHIPPED_RATIONALE_RUN
    from engine.plausibility.rationale_runs import report_table

    text = report_table(SHIPPED_RACU_RUN, SHIPPED_RATIONALE_RUN)(ROOT / "results")
    assert text.count("\n| ") >= 8 and "Spearman's rho between RACU and AUPRC over the" in text


def test_the_benchmarks_view_shows_the_shipped_pairing_when_the_current_view_has_no_rationale_run():
    """Out of the box the section draws the shipped bAbI-1 pairing (labelled) with gold AUPRC selected: a chart and
    a table of the measures, not an empty state."""
    from streamlit.testing.v1 import AppTest

    def page():
        import pandas as pd

        from app.benchmark_views import render_faith_plausibility

        render_faith_plausibility(pd.DataFrame(), None)

    at = AppTest.from_function(page, default_timeout=120).run()
    assert not at.exception
    assert any("shipped bAbI-1 pairing" in c.value for c in at.caption)
    assert any("Spearman over the" in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert len(table) >= 8 and (table["plaus_low"] <= table["plaus"]).all()
