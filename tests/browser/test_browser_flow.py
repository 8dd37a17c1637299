"""One flow between the pages in a real headless Chromium: a measure ranked on Benchmarks opens
Explain on an example with that measure, which says how that measure fared on this model; Explain with three measures
hands them to Masking, which draws the three curves on the one input against the random band."""
from __future__ import annotations

import time
import urllib.parse

import pytest
from browser_helpers import (
    NEEDS_CHROMIUM,
    ROOT,
    SHOTS,
    TALL_WINDOW,
    chromium,
    displayed_button,
    linked_measures,
    save_with_metadata,
    serve_app,
    wait_for,
    wait_for_links_in_order,
)

pytestmark = NEEDS_CHROMIUM

SHIPPED = "tiny-rt-masked-s0"  # the model of the shipped run results/tiny-rt-3seeds
TEXT = "an unredeemable mess, but the cast is wonderful"
THREE = ["grad-l2", "loo-sign", "ig-sign"]


@pytest.fixture(scope="module")
def flow_app(tmp_path_factory, toy_classifier):
    """The toy classifier under the shipped run's model id (dataset rt: its ranking is the shipped run's) and as
    `toy-flow` (toy data), over a results store holding the shipped run (linked, read only)."""
    from engine.models import save_classifier

    cache = tmp_path_factory.mktemp("flow_cache")
    save_with_metadata(toy_classifier, SHIPPED, cache, dataset="rt")
    save_classifier(toy_classifier, "toy-flow", cache_dir=cache)
    results = tmp_path_factory.mktemp("flow_results")
    (results / "tiny-rt-3seeds").symlink_to(ROOT / "results" / "tiny-rt-3seeds", target_is_directory=True)
    with serve_app(cache, results) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(TALL_WINDOW, downloads=tmp_path_factory.mktemp("flow_downloads"))
    yield driver
    driver.quit()


def _main_text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, "[data-testid='stMain']").text


def test_a_benchmarks_ranking_opens_explain_on_an_example_with_that_measure_and_its_standing(flow_app, browser):
    """Benchmarks opens on the shipped run's ranking; the second-ranked measure's link opens Explain at /explain on the
    first rt test input with that measure alone (one heatmap), and beside it that measure's standing: rank 2 of the
    run's measures, from results/tiny-rt-3seeds, with a link back to its curve."""
    from selenium.webdriver.common.by import By

    from engine.faithfulness.shipped_ranking import ranked_measures, stored_rows_for
    from engine.results import ResultsStore

    order = ranked_measures(stored_rows_for(ResultsStore(ROOT / "results"), SHIPPED, "rt"), SHIPPED, "tiny", "rt",
                            "masked")
    browser.get(f"{flow_app}/benchmarks")
    wait_for(browser, "h1", text="Benchmarks")
    links = wait_for_links_in_order(browser, order)
    assert linked_measures(links) == order, "one link per ranked measure, in the ranking's order"
    _, href = links[1]
    anchor = next(a for a in browser.find_elements(By.CSS_SELECTOR, "[data-testid='stMain'] a")
                  if (a.get_attribute("href") or "") == href)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", anchor)
    anchor.click()
    wait_for(browser, "h1", text="Explain a prediction")
    wait_for(browser, ".token-heatmap")
    wait_for(browser, "[data-testid='stMain']", text="Standing on this model.")
    deadline = time.time() + 60
    while urllib.parse.urlparse(browser.current_url).path != "/explain":
        assert time.time() < deadline, browser.current_url
        time.sleep(0.3)
    time.sleep(1.0)
    assert len(browser.find_elements(By.CSS_SELECTOR, ".token-heatmap")) == 1, "the linked measure alone"
    query = urllib.parse.parse_qs(urllib.parse.urlparse(browser.current_url).query)
    assert query["measures"] == [order[1]] and query["model"] == [SHIPPED]
    text = _main_text(browser)
    assert f"RACU rank 2 of {len(order)}" in text and "results/tiny-rt-3seeds" in text, text[-1500:]
    back = [a.get_attribute("href") or "" for a in browser.find_elements(By.CSS_SELECTOR, "[data-testid='stMain'] a")]
    assert any("/benchmarks?" in h and "run=tiny-rt-3seeds" in h for h in back), back


def test_explain_hands_three_measures_to_masking_which_draws_them_against_the_random_band(flow_app, browser):
    """Explain on three measures; "Mask this text step by step" opens Masking with the first and the other two to
    compare: the chart's legend holds the three measures and the random baseline, and the URL keeps the comparison."""
    from selenium.webdriver.common.by import By

    query = urllib.parse.urlencode({"model": "toy-flow", "text": TEXT, "measures": ",".join(THREE)})
    browser.get(f"{flow_app}/explain?{query}")
    wait_for(browser, "h1", text="Explain a prediction")
    deadline = time.time() + 180
    while len(browser.find_elements(By.CSS_SELECTOR, ".token-heatmap")) < 3:
        assert time.time() < deadline, _main_text(browser)[-1500:]
        time.sleep(0.3)
    button = displayed_button(browser, "Mask this text step by step")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
    button.click()
    wait_for(browser, "h1", text="Step-by-step masking")
    wait_for(browser, ".masking-steps", timeout=300)  # the hand-off runs the masking at once
    deadline = time.time() + 60
    while True:  # plotly draws the legend once the chart is laid out
        legend = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .legendtext")]
        if set(THREE) | {"random (mean)"} <= set(legend):
            break
        assert time.time() < deadline, f"legend {legend}"
        time.sleep(0.5)
    assert any(name.startswith("random (min-max") for name in legend), legend
    shown = urllib.parse.parse_qs(urllib.parse.urlparse(browser.current_url).query)
    # the first heatmap's measure (Explain shows them cheapest first) is masked by, the other two compared
    assert shown["measure"] == ["grad-l2"] and sorted(shown["compare"][0].split(",")) == ["ig-sign", "loo-sign"]
    assert "Lowest mean p(" in _main_text(browser)
    plot = browser.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")[0]
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", plot)
    time.sleep(1.0)
    SHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SHOTS / "masking-compare.png"))
