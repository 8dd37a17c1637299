"""One flow between the pages, driven by Streamlit's AppTest: Explain says beside each heatmap how
that measure fared on this model (app/measure_standing.py: its RACU rank with the interval from the shipped run, or
"no evidence yet") and links to its curve on Benchmarks; Explain hands its shown measures to Masking, which draws
each of their curves on the one input against the random band; the Report card's measures link to Explain."""
from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

from app import trust
from app.measure_standing import standing_of
from engine.faithfulness.shipped_ranking import stored_rows_for
from engine.results import ResultsStore

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
SHIPPED = "tiny-rt-masked-s0"
TEXT = "the acting was truly bad and the story poor"
pytestmark = pytest.mark.usefixtures("one_thread")


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=300)


def _shipped_evidence():
    rows = stored_rows_for(ResultsStore(ROOT / "results"), SHIPPED, "rt")
    return trust.benchmark_evidence(rows, SHIPPED, "tiny", "rt", "masked")


def test_a_measures_standing_is_its_rank_and_interval_in_the_models_run():
    """Each measure's line names its rank among the run's measures, its RACU with the run's own interval and the run;
    a measure the run did not score says so; with no evidence the line says "no evidence yet"."""
    evidence = _shipped_evidence()
    for rank, s in enumerate(evidence.standings, start=1):
        standing = standing_of(s.measure, (evidence,))
        assert standing.run == "tiny-rt-3seeds"
        (line,) = standing.lines
        assert line.startswith(f"RACU rank {rank} of {len(evidence.order)}: {s.value:.1f}% (95% CI {s.low:.1f} to "
                               f"{s.high:.1f})"), line
        assert "this model" in line and "results/tiny-rt-3seeds" in line
    missing = standing_of("attention-rollout", (evidence,))
    assert missing.run is None and "not scored in tiny-rt-3seeds" in missing.lines[0]
    assert standing_of("loo-sign", ()).lines[0].startswith("No evidence yet")


@pytest.fixture()
def two_models(models_cache, toy_classifier):
    """The toy classifier as `toy-app` (toy data, no evidence) and under the shipped run's model id with dataset rt."""
    from engine.models import save_classifier

    save_classifier(toy_classifier, "toy-app")
    folder = Path(save_classifier(toy_classifier, SHIPPED) or models_cache / SHIPPED)
    meta = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    (folder / "metadata.json").write_text(json.dumps({**meta, "dataset": "rt"}), encoding="utf-8")
    return models_cache


def _standings(at: AppTest) -> list[str]:
    return [c.value for c in at.caption if c.value.startswith("**Standing on this model.**")]


def test_explain_shows_each_measures_standing_beside_its_heatmap_and_links_its_curve(two_models):
    """On the shipped run's model: one standing per heatmap, in the heatmaps' order, each the run's rank and interval,
    with a link to Benchmarks on that run's curves; on a model without evidence: "no evidence yet"."""
    evidence = _shipped_evidence()
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params.update({"model": SHIPPED, "text": TEXT, "measures": "ig-sign,loo-sign"})
    _run(at)
    assert len(at.get("html")) == 2
    lines = _standings(at)
    assert len(lines) == 2
    for line, measure in zip(lines, ["ig-sign", "loo-sign"], strict=True):
        rank = evidence.order.index(measure) + 1
        assert f"RACU rank {rank} of {len(evidence.order)}" in line, line
    links = [p for p in at.page_link if p.proto.page == "benchmarks"]
    assert len(links) == 2
    assert all(urllib.parse.parse_qs(p.proto.query_string) == {"run": ["tiny-rt-3seeds"], "part": ["curves"]}
               for p in links)

    other = AppTest.from_file(MAIN, default_timeout=300)
    other.query_params.update({"model": "toy-app", "text": TEXT, "measures": "grad-l2"})
    _run(other)
    (line,) = _standings(other)
    assert "No evidence yet" in line


def test_explain_hands_its_shown_measures_to_masking_which_draws_each_against_the_random_band(two_models):
    """Explain's hand-off carries the measure to mask by and the other shown ones; Masking, opened with them, masks
    the input by each (the same class and levels), draws the three curves beside random's grey band, says which falls
    lowest, and puts every curve in the CSV."""
    import numpy as np

    from engine import mask_single_input
    from engine.models import load_classifier

    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params.update({"model": "toy-app", "text": TEXT, "measures": "grad-l2,loo-sign,ig-sign"})
    _run(at)
    at.selectbox(key="explain_handoff_measure").set_value("loo-sign")
    _run(at)
    at.button(key="explain_to_masking").click()
    _run(at)
    assert at.title[0].value == "Step-by-step masking"
    view = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert view["measure"] == "loo-sign" and view["compare"] == "grad-l2,ig-sign"
    assert at.multiselect(key="masking_compare").value == ["grad-l2", "ig-sign"]
    compared = at.session_state["masking_compared"]
    assert set(compared) == {"grad-l2", "ig-sign"}
    classifier = load_classifier("toy-app")
    main = at.session_state["masking_result"]
    for measure, curve in compared.items():  # each is the engine's own curve for that measure on this input
        own = mask_single_input(classifier, TEXT, measure, random_seeds=(), target=int(main.measure.target[0]),
                                ratios=main.ratios).curves()["measure"]
        assert np.allclose(curve, own, atol=1e-6), measure
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [t.get("name") for t in spec["data"]]
    assert {"loo-sign", "grad-l2", "ig-sign", "random (mean)"} <= set(names)
    band = next(t for t in spec["data"] if str(t.get("name", "")).startswith("random (min-max"))
    assert band["fill"] == "toself" and band["fillcolor"].startswith("rgba(127,127,127"), "random is the grey band"
    assert any("Lowest mean p(" in c.value for c in at.caption)


def test_the_report_cards_measures_link_to_explain_on_an_example(monkeypatch, tmp_path, models_cache, toy_classifier):
    """The recovery table's measures (random, the baseline, left out) each link to Explain with that measure alone,
    with the card's planted model where the models cache holds it, on its dataset's first test input."""
    from card_rows import MODELS, card_rows, truth_rows

    from engine.data import get_dataset
    from engine.models import save_classifier

    results = tmp_path / "results"
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(results))
    store = ResultsStore(results / "groundtruth")
    for model, q in MODELS.items():
        store.write_cell("small", {"model": model, "kind": "truth"}, truth_rows(model, q), {})
        store.write_cell("small", {"model": model, "operator": "mask"}, card_rows(model, q, "mask"), {})
    save_classifier(toy_classifier, "gt-q65")  # a planted model of the card, in the models cache (toy data)
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    at.switch_page(str(ROOT / "pages" / "report_card.py"))
    _run(at)
    links = [p for p in at.page_link if p.proto.page == "explain"]
    views = [{k: v[0] for k, v in urllib.parse.parse_qs(p.proto.query_string).items()} for p in links]
    assert [v["measures"] for v in views] == ["loo-sign"]
    assert views[0]["model"] == "gt-q65" and views[0]["text"] == get_dataset("toy", 0).split("test")[0].primary
