"""In a real headless Chromium: a shared Explain link (`/explain?model=...&text=...`) opens the Explain page
and runs its view without Streamlit's "Page not found" dialog, and hostile class names render as text (no
link, no remote image, no script in the page)."""
from __future__ import annotations

import time
import urllib.parse

import pytest
from browser_helpers import NEEDS_CHROMIUM, chromium, serve_app, wait_for
from hostile_models import HOSTILE, build_hostile_model

pytestmark = NEEDS_CHROMIUM


@pytest.fixture()
def hostile_models(models_cache, tmp_path):
    return build_hostile_model(models_cache, tmp_path)


@pytest.fixture()
def browser():
    """A fresh browser for each test (the module-scoped one of tests/conftest.py would carry one test's page into the next)."""
    driver = chromium("1400,1400")
    yield driver
    driver.quit()


def _load_watching_for_not_found(driver, url: str, css: str, timeout: float = 180) -> bool:
    """Open `url` and poll until `css` is present; True when a "Page not found" dialog showed at any point."""
    from selenium.webdriver.common.by import By

    driver.get(url)
    seen, deadline = False, time.time() + timeout
    while not driver.find_elements(By.CSS_SELECTOR, css):
        seen |= "Page not found" in driver.find_element(By.TAG_NAME, "body").text
        assert time.time() < deadline, f"{css} never appeared at {url}"
        time.sleep(0.25)
    time.sleep(1.0)  # a dialog sent with the page would be up by now
    return seen or "Page not found" in driver.find_element(By.TAG_NAME, "body").text


def test_a_shared_explain_link_opens_without_page_not_found_and_shows_hostile_names_as_text(hostile_models, tmp_path,
                                                                                            browser):
    from selenium.webdriver.common.by import By

    query = urllib.parse.urlencode({"model": "hostile", "text": "a fine film", "measures": "grad-l2", "level": "word"})
    with serve_app(hostile_models, tmp_path / "results") as url:
        for path in ("/explain", "/"):
            assert not _load_watching_for_not_found(browser, f"{url}{path}?{query}", ".token-heatmap"), path
            wait_for(browser, "h1", text="Explain a prediction")
            assert urllib.parse.parse_qs(urllib.parse.urlparse(browser.current_url).query)["text"] == ["a fine film"]
            main = browser.find_element(By.CSS_SELECTOR, "[data-testid='stMain']")
            # links out of the page (a heading's own "#slug" anchor is Streamlit's and stays in the page)
            links = [a.get_dom_attribute("href") or "" for a in main.find_elements(By.TAG_NAME, "a")]
            assert not [h for h in links if "evil" in h and not h.startswith("#")], links
            assert not main.find_elements(By.CSS_SELECTOR, "img[src*='evil'], script")
            assert "evil.example" in main.text  # the names are on the page, as text
            subheader = main.find_element(By.CSS_SELECTOR, "h3").text.replace("\u2060", "")
            assert any(subheader.startswith(f"Prediction: {name} (") for name in HOSTILE), subheader
