"""The Explain page's view of the top pairs (app/interaction_view.py) in a real headless Chromium: opened from a
shared link with the shapley-interactions measure on the tiny toy model and a four-word text (exact: 16 coalitions),
the pairs table shows every pair of words with the engine's values, largest first, and a word of markup as text."""
from __future__ import annotations

import time
import urllib.parse
from itertools import combinations

import pytest
from browser_helpers import NEEDS_CHROMIUM, serve_saved, wait_for

pytestmark = NEEDS_CHROMIUM

TEXT = "a <b>bold</b> funny film"


@pytest.fixture(scope="module")
def pairs_app(tmp_path_factory, toy_classifier):
    with serve_saved(tmp_path_factory, toy_classifier, "toy-pairs") as url:
        yield url



def test_the_pairs_view_shows_the_engines_top_pairs_and_escapes_the_words(pairs_app, browser, toy_classifier):
    from selenium.webdriver.common.by import By

    from engine.explain import explain_text

    engine = explain_text(toy_classifier, TEXT, measures=["shapley-interactions"]).extras["shapley-interactions"]
    pairs = engine["interactions"][0]
    assert len(pairs.players) == 4 and pairs.exact
    query = urllib.parse.urlencode({"model": "toy-pairs", "text": TEXT, "measures": "shapley-interactions"})
    browser.get(f"{pairs_app}/explain?{query}")
    wait_for(browser, "h1", text="Explain a prediction")
    deadline = time.time() + 120
    while True:  # st.html draws into the page itself (no iframe); a rerun may redraw it: read it settled
        rows = [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
                for r in browser.find_elements(By.CSS_SELECTOR, "table.interaction-pairs tr")]
        rows = [r for r in rows if r]
        if len(rows) == 6:
            break
        assert time.time() < deadline, browser.find_element(By.TAG_NAME, "body").text[-1500:]
        time.sleep(0.3)
    words = ["a", "<b>bold</b>", "funny", "film"]
    assert {frozenset(r[:2]) for r in rows} == {frozenset(p) for p in combinations(words, 2)}
    shown = [float(r[2]) for r in rows]
    assert shown == [round(v, 4) for _, _, v in pairs.top(6)]
    assert all(abs(a) >= abs(b) for a, b in zip(shown, shown[1:]))
    table = browser.find_element(By.CSS_SELECTOR, "table.interaction-pairs")
    assert not table.find_elements(By.TAG_NAME, "b"), "a word's markup became HTML"
