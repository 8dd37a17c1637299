"""What a person sees in headless Chromium about the input and the anonymised explanations: Explain on an emoji-only
text (the toy tokenizer knows no emoji: one [UNK]) still predicts, and says beside the prediction that the model
reads next to nothing of the text; Annotate draws its anonymised explanations, random among them, on one scale with
one colour bar that names no range (each bar once showed its measure's range, random's always 0-0.999).

One server over the toy classifier, with an annotation task written into its database before it starts."""
from __future__ import annotations

import re
import time

import pytest
from browser_helpers import NEEDS_CHROMIUM, explain_in_page, page_text, serve_app, type_into, wait_for, wait_for_text

pytestmark = NEEDS_CHROMIUM

MODEL = "toy-browser"
UNKNOWN_WORDS = "does not know most of this text"


@pytest.fixture(scope="module")
def app(tmp_path_factory, toy_classifier):
    from engine.annotation import AnnotationStore
    from engine.models import save_classifier
    from engine.plausibility import make_task

    cache, results = tmp_path_factory.mktemp("inputs_cache"), tmp_path_factory.mktemp("inputs_results")
    save_classifier(toy_classifier, MODEL, cache_dir=cache)
    # serve_app points the server at results/annotations.sqlite3
    store = AnnotationStore(results / "annotations.sqlite3")
    store.add_tasks([make_task(MODEL, "a gorgeous witty film", ["a", "gorgeous", "witty", "film"],
                               {"random": [0.24975, 0.999, 0.4995, 0.0999], "grad-l2": [10.0, 40.0, 20.0, 4.0]},
                               target=1, target_name="positive", target_source="predicted", label=1,
                               label_name="positive")])
    with serve_app(cache, results) as url:
        yield url


def test_an_emoji_only_text_is_predicted_with_a_warning_that_the_model_cannot_read_it(app, browser):  # noqa: F811
    browser.get(f"{app}/explain")  # the app opens on the home page
    wait_for(browser, "h1", text="Explain")
    explain_in_page(browser, "😀🎬🍿", "[UNK]")
    wait_for_text(browser, UNKNOWN_WORDS, timeout=60)
    text = page_text(browser)
    assert "Prediction:" in text and "[UNK]" in text[text.index(UNKNOWN_WORDS) - 400:]
    explain_in_page(browser, "the movie was really good", "really")
    deadline = time.time() + 30
    while UNKNOWN_WORDS in page_text(browser):  # an ordinary review: the warning goes
        assert time.time() < deadline, "the warning stayed for a readable text"
        time.sleep(0.5)


def test_annotators_see_the_explanations_on_one_scale_without_ranges(app, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    browser.get(f"{app}/annotate")
    wait_for(browser, "h1", text="Annotate")
    type_into(browser, "Your name", "ann")
    wait_for_text(browser, "Explanation B", timeout=120)
    deadline = time.time() + 30
    while len(maps := [e.get_attribute("outerHTML") for e in browser.find_elements(By.CSS_SELECTOR, ".token-heatmap")
                       if "Explanation" in e.text]) < 2:
        assert time.time() < deadline, "the two explanations were not drawn"
        time.sleep(0.3)
    colours = [re.findall(r"background:\s*(#[0-9a-f]{6}|rgb\([^)]*\))", m) for m in maps]
    assert colours[0] == colours[1] and len(colours[0]) == 4, colours  # token by token the same colours
    for m in maps:
        assert "colour-scale" not in m and "0.999" not in m and "40" not in m, m
    scales = browser.find_elements(By.CSS_SELECTOR, ".shared-scale")
    assert len(scales) == 1 and not re.search(r"\d", scales[0].text), [s.text for s in scales]
