"""The home page in a real browser (headless Debian chromium with selenium, as tests/browser/test_browser.py): the app opens
on it, it ranks the measures for the sidebar's model from the shipped results, switching the sidebar's model changes
the card and the ranking, and a ranked measure's link opens Explain on an example with that measure."""
from __future__ import annotations

import time
import urllib.parse
from pathlib import Path

import pytest
from browser_helpers import (
    NEEDS_CHROMIUM,
    SHOTS,
    choose_option,
    linked_measures,
    page_text,
    ranking_links,
    save_with_metadata,
    serve_app,
    wait_for,
    wait_for_links,
    wait_for_links_in_order,
    wait_for_text,
)

pytestmark = NEEDS_CHROMIUM

ROOT = Path(__file__).resolve().parents[2]
TITLE = "Which explanation of this prediction can I trust?"
SHIPPED = "tiny-rt-masked-s0"  # the model of the shipped run results/tiny-rt-3seeds


@pytest.fixture(scope="module")
def home_app(tmp_path_factory, toy_classifier):
    """The app over a models cache holding the toy classifier as `toy-home` (no evidence anywhere) and under the
    shipped run's model id with its dataset set to rt, and a results store holding the shipped run and report cards
    (linked, read only: nothing on these pages writes)."""
    from engine.models import save_classifier

    cache = tmp_path_factory.mktemp("home_cache")
    save_classifier(toy_classifier, "toy-home", cache_dir=cache)
    save_with_metadata(toy_classifier, SHIPPED, cache, dataset="rt")
    results = tmp_path_factory.mktemp("home_results")
    for run in ("tiny-rt-3seeds", "groundtruth"):
        (results / run).symlink_to(ROOT / "results" / run, target_is_directory=True)
    with serve_app(cache, results) as url:
        yield url


def test_the_app_opens_on_home_ranks_the_sidebars_model_and_follows_a_switch(home_app, browser):  # noqa: F811
    """/ shows the home page for the default model (the shipped run's): its card, leave one out ranked first on
    RACU with the run named, a link per measure; choosing the model without evidence changes the card and says
    in one sentence that nothing ranks it, with the admin's button."""
    from engine.faithfulness.shipped_ranking import ranked_measures, stored_rows_for
    from engine.results import ResultsStore

    order = ranked_measures(stored_rows_for(ResultsStore(ROOT / "results"), SHIPPED, "rt"), SHIPPED, "tiny", "rt",
                            "masked")
    browser.get(home_app)
    wait_for(browser, "h1", text=TITLE)
    wait_for_text(browser, f"The model: {SHIPPED}")
    links = wait_for_links_in_order(browser, order)
    assert linked_measures(links) == order
    text = page_text(browser)
    assert "results/tiny-rt-3seeds" in text and "RACU %" in text and "higher: more faithful" in text
    assert links[0][0].endswith("1. leave one out (signed)"), links[0]  # after its icon's name
    time.sleep(1.0)  # the tables draw on a canvas after the text
    SHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SHOTS / "home.png"))

    choose_option(browser, "Checkpoint", "toy-home")
    wait_for_text(browser, "The model: toy-home")
    wait_for_text(browser, "No stored run or report card measures the explanations of toy-home")
    assert not ranking_links(browser)
    assert "Compute a first ranking" in page_text(browser)


def test_a_ranked_measures_link_opens_explain_with_that_measure_on_an_example(home_app, browser):  # noqa: F811
    """Clicking the second-ranked measure's link opens Explain at /explain with that measure alone, on the first
    rt test input, explained at once (one heatmap)."""
    from selenium.webdriver.common.by import By

    browser.get(home_app)
    wait_for(browser, "h1", text=TITLE)
    choose_option(browser, "Checkpoint", SHIPPED)
    links = wait_for_links(browser)
    label, href = links[1]
    measure = urllib.parse.parse_qs(urllib.parse.urlparse(href).query)["measures"][0]
    anchor = next(a for a in browser.find_elements(By.CSS_SELECTOR, "[data-testid='stMain'] a")
                  if (a.get_attribute("href") or "") == href)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", anchor)
    anchor.click()
    wait_for(browser, "h1", text="Explain a prediction")
    wait_for(browser, ".token-heatmap")
    deadline = time.time() + 60
    while urllib.parse.urlparse(browser.current_url).path != "/explain":
        assert time.time() < deadline, browser.current_url
        time.sleep(0.3)
    time.sleep(1.0)
    assert len(browser.find_elements(By.CSS_SELECTOR, ".token-heatmap")) == 1, "the linked measure alone"
    query = urllib.parse.parse_qs(urllib.parse.urlparse(browser.current_url).query)
    assert query["measures"] == [measure] and query["model"] == [SHIPPED]
