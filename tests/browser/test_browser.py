"""End to end in a real headless Chromium (Debian's chromium + chromedriver): `streamlit run
app/main.py` on a loopback port, type a review, press Explain, and check what a person sees.

Screenshots of each page land in a temporary folder, or in docs/ (shown in the README) with
ENGINE_UPDATE_SCREENSHOTS=1: a plain test run must not rewrite tracked files."""
from __future__ import annotations

import time

import pytest
from browser_helpers import NEEDS_CHROMIUM, SHOTS, explain_in_page, serve_saved, wait_for, wait_until_the_script_ends

pytestmark = NEEDS_CHROMIUM


def _first(find, timeout: float = 60):
    """The first element `find()` returns, polling until the page has drawn it (a rerun draws top down)."""
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.time() + timeout
    while True:
        try:
            found = find()
        except StaleElementReferenceException:  # a rerun replaced an element while it was read
            found = []
        if found:
            return found[0]
        assert time.time() < deadline, "the element was not drawn"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def app_url(tmp_path_factory, toy_classifier):
    with serve_saved(tmp_path_factory, toy_classifier, "toy-browser") as url:
        yield url


def test_type_a_review_and_see_the_explanation(app_url, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{app_url}/explain")  # the app opens on the home page
    wait_for(browser, "h1", text="Explain a prediction")
    explain_in_page(browser, "the movie was really good and fun", "fun")  # first run loads the model
    elapsed = explain_in_page(browser, "this film was dull and the plot was awful", "awful")
    main = browser.find_element(By.CSS_SELECTOR, "[data-testid='stMain']").text
    assert "Prediction: " in main and "Agreement between measures" in main
    heatmaps = browser.find_elements(By.CSS_SELECTOR, ".token-heatmap")
    assert len(heatmaps) == 4, "one heatmap per default measure"
    # timing is reported, not asserted: the machines are shared (bench/ and the README hold the figures)
    print(f"explain showed its first heatmap in {elapsed:.2f} s after the first load")
    SHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SHOTS / "explain.png"))


def test_markup_in_the_review_is_shown_as_text(app_url, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{app_url}/explain")  # the app opens on the home page
    wait_for(browser, "h1", text="Explain a prediction")
    browser.execute_script("window.__pwned = 0;")
    explain_in_page(browser, 'great <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> **bold**', "window")
    time.sleep(1)
    assert browser.execute_script("return window.__pwned") == 0, "no script from the review ran"
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid='stMain'] img[src='x']")
    heatmap_text = " ".join(e.text for e in browser.find_elements(By.CSS_SELECTOR, ".token-heatmap"))
    assert "<" in heatmap_text and "window" in heatmap_text, "the markup shows up as tokens of text"


@pytest.mark.parametrize("page, heading", [("models", "Models"), ("benchmarks", "Benchmarks"), ("masking", "Step-by-step masking"),
                                           ("annotate", "Annotate"), ("attention", "Attention as explanation"),
                                           ("data", "Your data"), ("simulability", "Simulability")])
def test_other_pages_render(app_url, browser, page, heading):
    """Each page runs to its end without an exception: its heading shows, the script finishes, and no
    exception box is on the page (the heading alone renders before a later line of the page fails)."""
    from selenium.webdriver.common.by import By

    browser.get(f"{app_url}/{page}")
    wait_for(browser, "h1", text=heading)
    wait_until_the_script_ends(browser)
    errors = browser.find_elements(By.CSS_SELECTOR, "[data-testid='stException']")
    assert not errors, f"{page}: " + " | ".join(e.text[:600] for e in errors)
    SHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SHOTS / f"{page}.png"))


def test_annotate_prepares_tasks_with_its_default_measures_on_a_transformer(app_url, browser):
    """On a transformer checkpoint, pressing 'Prepare tasks' with the page's defaults works (the defaults once
    included `attention`, which only the BiLSTM supports, and names of measures that do not exist)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(f"{app_url}/annotate")
    wait_for(browser, "h1", text="Annotate")
    wait_for(browser, "[data-testid='stMultiSelect']")
    chosen = browser.find_element(By.CSS_SELECTOR, "[data-testid='stMultiSelect']").text
    assert "grad-l2" in chosen and "attention\n" not in chosen + "\n", chosen
    # the page draws top down: the multiselect can be there before the number input and the button below it
    number = _first(lambda: [e for e in browser.find_elements(By.CSS_SELECTOR, "[data-testid='stNumberInput']")
                             if e.text.startswith("Test examples")]).find_element(By.TAG_NAME, "input")
    number.send_keys(Keys.CONTROL, "a")
    number.send_keys("2", Keys.TAB)
    time.sleep(1)
    _first(lambda: [b for b in browser.find_elements(By.TAG_NAME, "button") if b.text.strip() == "Prepare tasks"]).click()
    deadline = time.time() + 180
    while "new tasks" not in (body := browser.find_element(By.TAG_NAME, "body").text):
        assert time.time() < deadline, body[-1500:]
        assert "could not be prepared" not in body, body[-1500:]
        time.sleep(0.5)
    assert "2 new tasks" in body
