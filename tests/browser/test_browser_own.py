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
from browser_helpers import NEEDS_CHROMIUM, _buttons, explain_in_page, serve_app, wait_for

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


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _by_label(driver, testid: str, label: str):
    """The widget container (data-testid) whose label reads `label`."""
    from selenium.webdriver.common.by import By

    deadline = time.time() + 60
    while time.time() < deadline:
        for element in driver.find_elements(By.CSS_SELECTOR, f"[data-testid='{testid}']"):
            if element.text.strip().startswith(label):
                return element
        time.sleep(0.3)
    raise AssertionError(f"no {testid} labelled {label!r}")


def _type(driver, label: str, text: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = _by_label(driver, "stTextInput", label).find_element(By.TAG_NAME, "input")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(text)
    box.send_keys(Keys.TAB)  # Streamlit commits a text input on blur


def _selected(driver, label: str) -> str:
    """The option a selectbox shows as chosen (its search field holds it; the element text is only the label)."""
    from selenium.webdriver.common.by import By

    box = _by_label(driver, "stSelectbox", label)
    value = box.find_element(By.TAG_NAME, "input").get_attribute("value")
    return value or box.get_attribute("textContent").replace(label, "", 1).strip()


def _choose(driver, label: str, option: str) -> None:
    """Pick `option` in the selectbox labelled `label` (type to filter, Enter to choose). A rerun can replace
    the widget's element while we type: then find it again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    deadline = time.time() + 60
    while True:
        try:
            if _selected(driver, label) == option:
                return
            field = _by_label(driver, "stSelectbox", label).find_element(By.TAG_NAME, "input")
            field.click()
            field.send_keys(option)
            time.sleep(0.5)
            field.send_keys(Keys.ENTER)
            time.sleep(1.5)
        except StaleElementReferenceException:
            time.sleep(0.5)
        if time.time() > deadline:
            driver.save_screenshot("/tmp/browser_own_failure.png")
            raise AssertionError(f"{label!r} did not take {option!r}: it shows {_selected(driver, label)!r}")


def _click(driver, text: str, timeout: float = 60) -> None:
    from selenium.common.exceptions import (
        ElementClickInterceptedException,
        ElementNotInteractableException,
        StaleElementReferenceException,
    )
    from selenium.webdriver.common.by import By

    deadline = time.time() + timeout
    while True:
        try:
            buttons = [b for b in driver.find_elements(By.TAG_NAME, "button") if b.text.strip() == text and b.is_enabled()]
            if buttons:
                buttons[0].click()
                return
        except StaleElementReferenceException:  # a rerun replaced the button while it was read (Explain streams)
            pass
        except (ElementNotInteractableException, ElementClickInterceptedException):
            pass  # drawn but not yet clickable (an expander still opening, a rerun's overlay): try again
        assert time.time() < deadline, f"no button {text!r}"
        time.sleep(0.3)


def _page(driver, title: str) -> None:
    """Go to a page through the sidebar's navigation (keeps this browser session's state)."""
    from selenium.webdriver.common.by import By

    anchors = driver.find_elements(By.CSS_SELECTOR, "[data-testid='stSidebar'] a")
    links = [a for a in anchors if a.text.strip().splitlines()[-1:] == [title]]  # the text starts with the icon's name
    assert links, f"no page {title!r} in the sidebar: {[a.text for a in anchors]}"
    links[0].click()
    time.sleep(1)


def _page_text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def _wait_text(driver, text: str, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while text not in _page_text(driver):
        if time.time() > deadline:
            driver.save_screenshot("/tmp/browser_own_failure.png")
            raise AssertionError(f"{text!r} never appeared; the page says: {_page_text(driver)[-1500:]}")
        time.sleep(0.5)


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
    _type(browser, "Folder", str(folder))
    _type(browser, "Id (optional)", MODEL_ID)
    _click(browser, "Register")
    _wait_text(browser, f"Registered {MODEL_ID}")
    _click(browser, "Use it")
    _wait_text(browser, "fine-tuned elsewhere")  # the sidebar now shows the registered model

    # 2. Upload the CSV on the data page and register it under a name.
    _page(browser, "Your data")
    wait_for(browser, "h1", text="Your data")
    # the uploader comes after the page's heading, once the page's script has drawn it: wait for it too
    wait_for(browser, "[data-testid='stFileUploader'] input[type='file']").send_keys(str(csv_path))
    _wait_text(browser, "Dataset name")
    _type(browser, "Dataset name", DATASET)
    _click(browser, "Register")
    manifest = os.path.join(env["ENGINE_USER_DIR"], "datasets", f"{DATASET}.json")
    deadline = time.time() + 60
    while not os.path.isfile(manifest):
        assert time.time() < deadline, "the dataset was not registered: " + _page_text(browser)[-1500:]
        time.sleep(0.5)

    # 3. Explain a typed review with the registered model.
    _page(browser, "Explain")
    wait_for(browser, "h1", text="Explain a prediction")
    # type only once the page has drawn its form to the end (the Explain button): a rerun of the page while it was
    # still drawing (the newly registered model loading) replaced the text area and lost the typed review
    deadline = time.time() + 120
    while not _buttons(browser, "Explain"):
        assert time.time() < deadline, "the Explain page never drew its button"
        time.sleep(0.3)
    explain_in_page(browser, REVIEW, "acting")
    from engine.explain import explain_text
    from engine.models.foreign import load_foreign

    engine_view = explain_text(load_foreign(folder), REVIEW)
    predicted = toy_classifier.classes[int(engine_view.probabilities.argmax())]
    _wait_text(browser, f"Prediction: {predicted} ({engine_view.probabilities.max():.1%})")

    # 4. Hand the text over to step-by-step masking, which runs at once with MaSF p-values calibrated on the
    #    registered data (the user's datasets come first for a model fine-tuned elsewhere).
    hand_off = [b for b in browser.find_elements(By.TAG_NAME, "button") if b.text.strip().endswith("Mask this text step by step")]
    assert hand_off, "no hand-off button on the Explain page"
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", hand_off[0])
    hand_off[0].click()
    wait_for(browser, "h1", text="Step-by-step masking")
    assert browser.find_element(By.TAG_NAME, "textarea").get_attribute("value") == REVIEW
    _wait_text(browser, "was not masked-fine-tuned")  # the note on a model fine-tuned elsewhere
    assert _selected(browser, "Calibrate MaSF on") == DATASET
    wait_for(browser, ".masking-steps", timeout=300)
    _wait_text(browser, "MaSF p-value")
    # the p-value metric shows a number and the verdict that number gives at the 5% level (the page's text
    # always holds both phrases elsewhere, in the chart's axis title and the help, so reading the page's
    # whole text proves nothing)
    metric = _by_label(browser, "stMetric", "MaSF p-value")
    value = metric.find_element(By.CSS_SELECTOR, "[data-testid='stMetricValue']").text.strip()
    verdict = metric.find_element(By.CSS_SELECTOR, "[data-testid='stMetricDelta']").text.strip()
    p_value = float(value)
    assert 0.0 <= p_value <= 1.0, value
    assert verdict == ("in distribution" if p_value >= 0.05 else "out of distribution"), (value, verdict)

    # 5. Compute one benchmark cell (and its random baseline) on the registered data.
    _page(browser, "Benchmarks")
    wait_for(browser, "h1", text="Benchmarks")
    browser.find_element(By.XPATH, f"//*[contains(text(), 'Compute cells for {MODEL_ID}')]").click()
    _choose(browser, "Dataset", DATASET)
    number = _by_label(browser, "stNumberInput", "Examples").find_element(By.TAG_NAME, "input")
    number.send_keys(Keys.CONTROL, "a")
    number.send_keys("4")
    _click(browser, "Compute")
    _wait_text(browser, "cells computed", timeout=400)
    cells = os.path.join(env["ENGINE_RESULTS_DIR"], f"page-{MODEL_ID}", "cells")
    written = sorted(f for f in os.listdir(cells) if f.endswith(".json"))
    assert len(written) == 2, written  # loo-sign and its random baseline
    browser.save_screenshot("/tmp/browser_own_benchmarks.png")
