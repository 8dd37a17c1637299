"""Two models side by side, a page that follows the sidebar's model, and IG's budget shown and cancelled, in a real
headless Chromium (as tests/browser/test_browser.py): Explain explains one text under the sidebar's model and a second one,
each heatmap labelled with its model under each prediction; Benchmarks sets two models of one setting side by side
(a checkpoint of the shipped tiny run against the shipped MiniLM run); Benchmarks moves to the sidebar's model's run
when the sidebar changes; a long IG run shows its budget spent and Cancel stops it, the finished measure still shown.

Models: the packaged tiny model fine-tuned on toy (the session's `toy_classifier`, no checkpoint needed), saved under
the shipped tiny run's model id, under a MiniLM checkpoint's id of the shipped MiniLM run (never loaded: the
Benchmarks page reads the catalogue only), and as `toy-b`, its copy with the head's bias moved so that it predicts the
other class."""
from __future__ import annotations

import copy
import time
import urllib.parse

import pytest
import torch
from browser_helpers import (
    NEEDS_CHROMIUM,
    ROOT,
    SHOTS,
    TALL_WINDOW,
    choose_option,
    chromium,
    displayed_button,
    page_text,
    save_with_metadata,
    selected_option,
    serve_app,
    wait_for,
    wait_for_text,
)

pytestmark = NEEDS_CHROMIUM

SHIPPED = "tiny-rt-masked-s0"  # a checkpoint of results/tiny-rt-3seeds
MINILM = "minilm-rt-masked-s0"  # a checkpoint of results/minilm-rt-3seeds
SECOND = "toy-b"
TEXT = "an unredeemable mess, but the cast is wonderful"


def _moved_head(classifier, shift: float = 8.0):
    """A copy of `classifier` whose last layer's bias favours the class it predicts least for TEXT by `shift`
    logits: a second model that predicts differently."""
    from engine.explain import explain_text

    other = copy.deepcopy(classifier)
    least = int(explain_text(classifier, TEXT, measures=[]).probabilities.argmin())
    bias = [p for name, p in other.model.named_parameters() if name.endswith("bias")][-1]
    with torch.no_grad():
        bias[least] += shift
    return other


@pytest.fixture(scope="module")
def two_models(tmp_path_factory, toy_classifier):
    from engine.models import save_classifier

    cache = tmp_path_factory.mktemp("compare_cache")
    for model_id, meta in ((SHIPPED, {"dataset": "rt"}), (MINILM, {"dataset": "rt", "base_model": "minilm"})):
        save_with_metadata(toy_classifier, model_id, cache, **meta)
    second = _moved_head(toy_classifier)
    save_classifier(second, SECOND, cache_dir=cache)
    results = tmp_path_factory.mktemp("compare_results")
    for run in ("tiny-rt-3seeds", "minilm-rt-3seeds", "groundtruth"):
        (results / run).symlink_to(ROOT / "results" / run, target_is_directory=True)
    with serve_app(cache, results) as url:
        yield url, second


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(TALL_WINDOW, downloads=tmp_path_factory.mktemp("compare_downloads"))
    yield driver
    driver.quit()


def _main_text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, "[data-testid='stMain']").text


def _count(driver, css: str) -> int:
    from selenium.webdriver.common.by import By

    return len(driver.find_elements(By.CSS_SELECTOR, css))


def test_explain_draws_each_measure_under_both_models_side_by_side_with_each_prediction(two_models, browser,
                                                                                       toy_classifier):
    """/explain with `compare=toy-b`: the two measures' heatmaps of the sidebar's model, then a side-by-side section
    naming both models, each with its own prediction (the engine's, and the two differ), and each measure's two
    heatmaps labelled with their models (2 + 4 heatmaps); the URL keeps the second model."""
    from engine.explain import explain_text

    url, second = two_models
    query = urllib.parse.urlencode({"model": SHIPPED, "text": TEXT, "measures": "grad-l2,loo-sign", "compare": SECOND})
    browser.get(f"{url}/explain?{query}")
    wait_for(browser, "h1", text="Explain a prediction")
    wait_for_text(browser, f"Side by side: {SHIPPED} and {SECOND}")
    deadline = time.time() + 120
    while _count(browser, ".token-heatmap") < 6:
        assert time.time() < deadline, _main_text(browser)[-1500:]
        time.sleep(0.3)
    text = _main_text(browser)
    predictions = []
    for model_id, classifier in ((SHIPPED, toy_classifier), (SECOND, second)):
        probs = explain_text(classifier, TEXT, measures=[]).probabilities
        predicted = int(probs.argmax())
        predictions.append(predicted)
        assert f"{model_id} predicts {classifier.classes[predicted]} ({probs[predicted]:.1%})" in text, text[-2000:]
        for measure in ("grad-l2", "loo-sign"):
            assert f"{model_id} · {measure}" in text
    assert predictions[0] != predictions[1], "the second model predicts the other class"
    assert _count(browser, ".token-heatmap") == 6
    query = urllib.parse.parse_qs(urllib.parse.urlparse(browser.current_url).query)
    assert query["compare"] == [SECOND] and query["model"] == [SHIPPED]
    SHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SHOTS / "explain-side-by-side.png"))


def test_benchmarks_sets_a_checkpoint_of_one_run_beside_another_runs_model(two_models, browser):
    """The "Two models" part with the sidebar on the shipped tiny checkpoint: A is that checkpoint in its run, B the
    MiniLM run over its 3 seeds; the sentence names each side's first-ranked measure as the engine ranks it, and the
    two curve charts are titled with their models."""
    from selenium.webdriver.common.by import By

    from app.benchmark_compare import ALL_SEEDS, Side, ranking_of, rows_of_side
    from engine.results import ResultsStore

    url, _ = two_models
    browser.get(f"{url}/benchmarks?run=tiny-rt-3seeds&part=compare")
    wait_for(browser, "h1", text="Benchmarks")
    choose_option(browser, "Checkpoint", SHIPPED)
    wait_for_text(browser, "Two models side by side")
    rows = ResultsStore(ROOT / "results").load()
    rows = rows[rows["run"].isin(["tiny-rt-3seeds", "minilm-rt-3seeds"])]
    tops = []
    for side in (Side("tiny-rt-3seeds", "tiny", SHIPPED), Side("minilm-rt-3seeds", "minilm", ALL_SEEDS)):
        ranking = ranking_of(rows_of_side(rows, side))
        tops.append(ranking[ranking["measure"] != "random"]["measure"].iloc[0])
    wait_for_text(browser, f"A: {SHIPPED} (tiny-rt-3seeds) ranks {tops[0]} first")
    wait_for_text(browser, f"B: minilm, mean of 3 seeds (minilm-rt-3seeds) ranks {tops[1]} first")
    deadline = time.time() + 60
    while True:
        titles = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .gtitle")]
        if f"A: {SHIPPED} (tiny-rt-3seeds)" in titles and "B: minilm, mean of 3 seeds (minilm-rt-3seeds)" in titles:
            break
        assert time.time() < deadline, titles
        time.sleep(0.5)


def test_benchmarks_moves_to_the_sidebars_models_run_when_the_sidebar_changes(two_models, browser):
    """Opened on the tiny checkpoint, Benchmarks shows its run; choosing the MiniLM checkpoint in the sidebar moves
    the Run box and the ranking to the MiniLM run, and choosing the tiny one moves them back."""
    url, _ = two_models
    browser.get(f"{url}/benchmarks")
    wait_for(browser, "h1", text="Benchmarks")
    for model_id, run, family in ((SHIPPED, "tiny-rt-3seeds", "tiny"), (MINILM, "minilm-rt-3seeds", "minilm"),
                                  (SHIPPED, "tiny-rt-3seeds", "tiny")):
        choose_option(browser, "Checkpoint", model_id)
        deadline = time.time() + 60
        while selected_option(browser, "Run") != run:
            assert time.time() < deadline, f"the Run box shows {selected_option(browser, 'Run')!r} for {model_id}"
            time.sleep(0.3)
        wait_for_text(browser, f"Ranking: Recursive masking (no retraining) of {family} on rt")
        assert "not the sidebar's model" not in page_text(browser)


def test_the_report_card_moves_to_the_sidebars_models_card_when_the_sidebar_changes(two_models, browser):
    """The Report card opens on the tiny card for the tiny checkpoint; choosing the MiniLM checkpoint moves its Run
    and family boxes to the MiniLM card, and back."""
    url, _ = two_models
    browser.get(f"{url}/report_card")
    wait_for(browser, "h1", text="Report card")
    for model_id, run, family in ((SHIPPED, "tiny-rt-card", "tiny"), (MINILM, "minilm-rt-card", "minilm"),
                                  (SHIPPED, "tiny-rt-card", "tiny")):
        choose_option(browser, "Checkpoint", model_id)
        deadline = time.time() + 120
        while (selected_option(browser, "Run"), selected_option(browser, "Model family (planted into)")) != (run, family):
            assert time.time() < deadline, (f"for {model_id} the boxes show {selected_option(browser, 'Run')!r}, "
                                            f"{selected_option(browser, 'Model family (planted into)')!r}")
            time.sleep(0.5)


def test_a_long_ig_run_shows_its_budget_spent_and_cancel_stops_it_keeping_the_finished_measure(two_models, browser):
    """IG with every escalation stage forced (tolerances 0: 1000 + 3000 + 5000 path points, tens of seconds on the
    toy model): the progress bar names the points spent out of the budget; Cancel stops the run between two passes:
    the page says how far IG got (fewer than 9000), and grad-l2's heatmap, finished before, is still shown."""
    url, _ = two_models
    query = urllib.parse.urlencode({"model": SHIPPED, "text": TEXT, "measures": "grad-l2,ig-sign", "ig_steps": 1000,
                                    "ig_max_steps": 5000, "ig_tolerance": 0, "ig_abs_tolerance": 0})
    browser.get(f"{url}/explain?{query}")
    wait_for(browser, "h1", text="Explain a prediction")
    wait_for_text(browser, "of up to 9000 path points", timeout=120)
    started = time.time()
    displayed_button(browser, "Cancel").click()
    wait_for_text(browser, "Stopped after 1 of 2 measures (ig-sign had computed", timeout=60)
    assert time.time() - started < 30, "stopped between passes, not at the end of the run"
    text = _main_text(browser)
    done = int(text.split("ig-sign had computed ", 1)[1].split(" ", 1)[0])
    assert 0 < done < 9000
    assert _count(browser, ".token-heatmap") == 1 and "Prediction:" in text
    assert "Integrated gradients' step budget: 1000 steps, up to 5000 where the scores do not add up" in text
