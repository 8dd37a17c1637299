"""End to end in headless Chromium with the user's own model and data, as a newcomer would: a Hugging Face
folder written by `save_pretrained` (not a checkpoint of this project) is registered on the Models page and a
CSV of this test's own making on the Your data page; then a typed review is explained, masked step by step
with MaSF p-values (calibrated on the registered data), and one benchmark cell is computed on that data.

One streamlit server and one browser session for the whole flow (clicking the sidebar keeps the session)."""
from __future__ import annotations

import csv
import os
import time

import pytest
from browser_helpers import (
    NEEDS_CHROMIUM,
    buttons_labelled,
    choose_option,
    click_button,
    explain_in_page,
    go_to_page,
    page_text,
    selected_option,
    serve_app,
    type_into,
    wait_for,
    wait_for_text,
    widget_by_label,
)

pytestmark = NEEDS_CHROMIUM

MODEL_ID = "foreign-toy"
DATASET = "my-reviews"
REVIEW = "the acting was truly bad and the story poor"


@pytest.fixture(scope="module")
def own_files(tmp_path_factory, toy_classifier):
    """A foreign HF folder (the toy classifier saved the transformers way, label names in id2label, no
    metadata.json) and a labelled CSV with its own column names."""
    from engine.data import get_dataset

    folder = tmp_path_factory.mktemp("own") / "my-classifier"
    model = toy_classifier.model
    model.config.id2label = dict(enumerate(toy_classifier.classes))
    model.config.label2id = {c: i for i, c in enumerate(toy_classifier.classes)}
    model.save_pretrained(folder)
    toy_classifier.tokenizer.save_pretrained(folder)
    assert not (folder / "metadata.json").exists() and (folder / "model.safetensors").is_file()

    toy = get_dataset("toy")
    path = folder.parent / "reviews.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["review", "sentiment"])
        for split in ("train", "validation", "test"):
            for e in toy.split(split):
                writer.writerow([e.primary, toy.classes[e.label]])
    return folder, path


@pytest.fixture(scope="module")
def app(tmp_path_factory, own_files, monkeypatch_module):
    """The dashboard over empty models cache, results store and user folder (what a newcomer has)."""
    user = tmp_path_factory.mktemp("user")
    monkeypatch_module.setenv("ENGINE_USER_DIR", str(user))  # serve_app passes this process's environment on
    cache, results = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("results")
    with serve_app(cache, results) as url:
        yield url, {"ENGINE_USER_DIR": str(user), "ENGINE_RESULTS_DIR": str(results)}


def test_own_model_and_data_explained_masked_and_benchmarked(app, browser, own_files, toy_classifier):  # noqa: F811
    """A foreign model folder and a user's CSV go through every step a newcomer takes, and what the pages show
    equals what the engine computes for the same model and text."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, env = app
    folder, csv_path = own_files
    browser.get(f"{url}/models")
    wait_for(browser, "h1", text="Models")

    # 1. Register the folder by path (by reference: nothing is copied into or out of it).
    type_into(browser, "Folder", str(folder))
    type_into(browser, "Id (optional)", MODEL_ID)
    click_button(browser, "Register")
    wait_for_text(browser, f"Registered {MODEL_ID}")
    click_button(browser, "Use it")
    wait_for_text(browser, "fine-tuned elsewhere")  # the sidebar now shows the registered model

    # 2. Upload the CSV on the data page and register it under a name.
    go_to_page(browser, "Your data")
    wait_for(browser, "h1", text="Your data")
    # the uploader comes after the page's heading, once the page's script has drawn it: wait for it too
    wait_for(browser, "[data-testid='stFileUploader'] input[type='file']").send_keys(str(csv_path))
    wait_for_text(browser, "Dataset name")
    type_into(browser, "Dataset name", DATASET)
    click_button(browser, "Register")
    manifest = os.path.join(env["ENGINE_USER_DIR"], "datasets", f"{DATASET}.json")
    deadline = time.time() + 60
    while not os.path.isfile(manifest):
        assert time.time() < deadline, "the dataset was not registered: " + page_text(browser)[-1500:]
        time.sleep(0.5)

    # 3. Explain a typed review with the registered model.
    go_to_page(browser, "Explain")
    wait_for(browser, "h1", text="Explain a prediction")
    # type only once the page has drawn its form to the end (the Explain button): a rerun of the page while it was
    # still drawing (the newly registered model loading) replaced the text area and lost the typed review
    deadline = time.time() + 120
    while not buttons_labelled(browser, "Explain"):
        assert time.time() < deadline, "the Explain page never drew its button"
        time.sleep(0.3)
    explain_in_page(browser, REVIEW, "acting")
    from engine.explain import explain_text
    from engine.models.foreign import load_foreign

    engine_view = explain_text(load_foreign(folder), REVIEW)
    predicted = toy_classifier.classes[int(engine_view.probabilities.argmax())]
    wait_for_text(browser, f"Prediction: {predicted} ({engine_view.probabilities.max():.1%})")

    # 4. Hand the text over to step-by-step masking, which runs at once with MaSF p-values calibrated on the
    #    registered data (the user's datasets come first for a model fine-tuned elsewhere).
    hand_off = [b for b in browser.find_elements(By.TAG_NAME, "button") if b.text.strip().endswith("Mask this text step by step")]
    assert hand_off, "no hand-off button on the Explain page"
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", hand_off[0])
    hand_off[0].click()
    wait_for(browser, "h1", text="Step-by-step masking")
    assert browser.find_element(By.TAG_NAME, "textarea").get_attribute("value") == REVIEW
    wait_for_text(browser, "was not masked-fine-tuned")  # the note on a model fine-tuned elsewhere
    assert selected_option(browser, "Calibrate MaSF on") == DATASET
    wait_for(browser, ".masking-steps", timeout=300)
    wait_for_text(browser, "MaSF p-value")
    # the p-value metric shows a number and the verdict that number gives at the 5% level (the page's text
    # always holds both phrases elsewhere, in the chart's axis title and the help, so reading the page's
    # whole text proves nothing)
    metric = widget_by_label(browser, "stMetric", "MaSF p-value")
    value = metric.find_element(By.CSS_SELECTOR, "[data-testid='stMetricValue']").text.strip()
    verdict = metric.find_element(By.CSS_SELECTOR, "[data-testid='stMetricDelta']").text.strip()
    p_value = float(value)
    assert 0.0 <= p_value <= 1.0, value
    assert verdict == ("in distribution" if p_value >= 0.05 else "out of distribution"), (value, verdict)

    # 5. Compute one benchmark cell (and its random baseline) on the registered data.
    go_to_page(browser, "Benchmarks")
    wait_for(browser, "h1", text="Benchmarks")
    browser.find_element(By.XPATH, f"//*[contains(text(), 'Compute cells for {MODEL_ID}')]").click()
    choose_option(browser, "Dataset", DATASET)
    number = widget_by_label(browser, "stNumberInput", "Examples").find_element(By.TAG_NAME, "input")
    number.send_keys(Keys.CONTROL, "a")
    number.send_keys("4")
    click_button(browser, "Compute")
    wait_for_text(browser, "cells computed", timeout=400)
    cells = os.path.join(env["ENGINE_RESULTS_DIR"], f"page-{MODEL_ID}", "cells")
    written = sorted(f for f in os.listdir(cells) if f.endswith(".json"))
    assert len(written) == 2, written  # loo-sign and its random baseline
    browser.save_screenshot("/tmp/browser_own_benchmarks.png")
