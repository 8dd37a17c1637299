"""The Explain page in a real browser: the cheap measure's heatmap shows while a dear one still runs, and Cancel
stops the run, keeping what was done (needs chromium and chromium-driver, like tests/browser/test_browser.py)."""
from __future__ import annotations

import time
import urllib.parse

from browser_helpers import NEEDS_CHROMIUM, buttons_labelled, serve_app, wait_for
from selenium.webdriver.common.by import By

pytestmark = NEEDS_CHROMIUM
TEXT = " ".join(["the film was good but the plot was dull and slow"] * 8)  # ~90 tokens: beam takes seconds


def test_explain_streams_the_first_heatmap_and_cancel_keeps_the_measures_done(tmp_path, toy_classifier, monkeypatch,
                                                                              browser):  # noqa: F811
    """With grad-l2 and beam chosen (beam given first), grad-l2's heatmap is shown while beam still runs (a Cancel
    button is on the page); Cancel stops the run: only grad-l2's heatmap stays, with a note of how many were done."""
    from engine.models import save_classifier

    # the toy model keeps 16 tokens, which beam searches in a blink; 128 gives it a long enough input to cancel
    monkeypatch.setattr(toy_classifier, "metadata", dict(toy_classifier.metadata, max_length=128))
    save_classifier(toy_classifier, "toy-stream", cache_dir=tmp_path / "cache")
    with serve_app(tmp_path / "cache", tmp_path / "results") as url:
        browser.get(f"{url}/explain?" + urllib.parse.urlencode({"text": TEXT, "measures": "beam,grad-l2"}))
        wait_for(browser, ".token-heatmap", text="plot")
        cancel = buttons_labelled(browser, "Cancel")
        assert cancel, "the first heatmap is shown while the dearer measure still runs"
        assert len(browser.find_elements(By.CSS_SELECTOR, ".token-heatmap")) == 1
        cancel[0].click()
        wait_for(browser, "[data-testid='stMain']", text="Stopped after 1 of 2 measures")
        time.sleep(2)  # a run that was not stopped would add beam's heatmap by now
        heatmaps = browser.find_elements(By.CSS_SELECTOR, ".token-heatmap")
        assert len(heatmaps) == 1 and "gradient" in heatmaps[0].text.lower(), [h.text[:80] for h in heatmaps]
