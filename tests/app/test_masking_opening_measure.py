"""What a newcomer meets first on the Step-by-step masking page: it opens on the measure the
stored results rank most faithful for the chosen model (leave-one-out where none are stored), not on the first
measure of the list, whose curve sits on random masking; its Cancel button is gone once the run is done; and the
MaSF chart's axis titles fit the chart."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

from engine.models import save_classifier

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
MASKING = str(ROOT / "pages" / "masking.py")
SHIPPED = ROOT / "results"

pytestmark = pytest.mark.usefixtures("one_thread")


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=300)


def _masking_page() -> AppTest:
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    at.switch_page(MASKING)
    return _run(at)


def test_ranking_of_a_shipped_checkpoint_is_the_reports_ranking():
    """For a checkpoint with shipped cells the order is the RACU order of its run over the whole split (the
    README summary's "most faithful" first), never a beam subset of a few inputs."""
    from engine.faithfulness.shipped_ranking import ranked_measures
    from engine.faithfulness.summary import area_metrics_table
    from engine.results import ResultsStore

    store = ResultsStore(SHIPPED)
    data = store.load()
    ranked = ranked_measures(data, "tiny-babi-1-masked-s0", "tiny", "babi-1", "masked")
    run = store.load("tiny-babi1-3seeds")
    table = area_metrics_table(run[run["n_examples"] == 1000])
    expected = table[table["measure"] != "random"].sort_values("racu_pct", ascending=False)["measure"].tolist()
    assert ranked == expected and ranked[0] == "ig-sign"
    # another seed of the same recipe, not shipped, is ranked by its family's run
    assert ranked_measures(data, "tiny-babi-1-masked-s9", "tiny", "babi-1", "masked") == expected
    # no shipped cells of the checkpoint or its family: nothing ranked
    assert ranked_measures(data, "toy-x", "tiny", "toy", "masked") == []
    # the page reads only the runs that can hold the checkpoint's cells, and ranks the same
    from engine.faithfulness.shipped_ranking import stored_rows_for

    rows = stored_rows_for(store, "tiny-babi-1-masked-s0", "babi-1")
    assert set(rows["run"]) == {"tiny-babi1-3seeds", "tiny-babi1-beam-subset"}
    assert ranked_measures(rows, "tiny-babi-1-masked-s0", "tiny", "babi-1", "masked") == expected
    assert stored_rows_for(store, "toy-x", "toy").empty


def test_opening_measure_falls_back_to_loo_sign_then_the_first_offered():
    from engine.faithfulness.shipped_ranking import first_measure

    assert first_measure(["attention-cls-last", "grad-l2", "loo-sign"], []) == "loo-sign"
    assert first_measure(["attention-cls-last", "grad-l2", "loo-sign"], ["beam", "grad-l2"]) == "grad-l2"
    assert first_measure(["attention-cls-last", "grad-l2"], []) == "attention-cls-last"
    assert first_measure([], []) is None


@pytest.fixture()
def small_store(tmp_path, monkeypatch):
    """A results store holding one shipped run (tiny on bAbI-1, 3 seeds), read quickly by the page."""
    root = tmp_path / "results"
    shutil.copytree(SHIPPED / "tiny-babi1-3seeds", root / "tiny-babi1-3seeds")
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(root))
    return root


def test_masking_page_opens_on_the_measure_the_stored_results_rank_best(models_cache, small_store, toy_classifier):
    """A checkpoint whose cells the store holds opens on their best measure (ig-sign for that run), not on
    attention-cls-last."""
    save_classifier(toy_classifier, "tiny-babi-1-masked-s0")
    at = _masking_page()
    assert at.selectbox(key="masking_measure").value == "ig-sign"


def test_masking_page_opens_on_loo_sign_for_a_model_without_stored_results(models_cache, small_store, toy_classifier):
    save_classifier(toy_classifier, "toy-newcomer")
    at = _masking_page()
    offered = at.selectbox(key="masking_measure").options
    assert offered[0] != "loo-sign", "the check would pass without the fix"
    assert at.selectbox(key="masking_measure").value == "loo-sign"


def _axis_titles_fit(spec: dict) -> list[str]:
    """The axis titles longer than their axis: about 7.5 px per character of plotly's 14 px default title font,
    along the plot area (the figure's height less plotly's default 100 px of top and bottom margins)."""
    layout = spec.get("layout", {})
    height = layout.get("height", 450)
    problems = []
    for axis in ("yaxis",):
        title = layout.get(axis, {}).get("title", {})
        text = title.get("text", "") if isinstance(title, dict) else str(title)
        longest = max((len(line) for line in text.split("<br>")), default=0)
        if longest * 7.5 > height - 100:
            problems.append(f"{axis} {text!r} ({longest} characters) on a {height} px chart")
    return problems


def test_masking_run_leaves_no_cancel_button_and_its_axis_titles_fit(models_cache, small_store, toy_classifier):
    save_classifier(toy_classifier, "toy-newcomer")
    at = _masking_page()
    at.text_area(key="masking_text").input("the movie was really good and fun and lovely")
    at.selectbox(key="masking_measure").set_value("grad-l2")
    at.button(key="masking_run").click()
    _run(at)
    assert at.metric[0].value.startswith("0 /"), "the run finished"
    assert "masking_cancel" not in [b.key for b in at.button], "nothing is left to cancel once the run is done"
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(charts) == 2, "the curve and the MaSF p-values"
    problems = [p for spec in charts for p in _axis_titles_fit(spec)]
    assert not problems, problems
    # the 0.05 line's label sits on the line (on a log axis plotly reads an annotation's y as its log10)
    (label,) = charts[1]["layout"]["annotations"]
    assert label["y"] == pytest.approx(math.log10(0.05)) and "0.05" in label["text"]
