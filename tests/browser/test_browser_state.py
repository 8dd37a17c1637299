"""State in headless Chromium: after a selector changes, every box the page shows must name what the numbers under
it belong to. The Report card on a store of two runs that share no family and no masking operator: switching the run
must move the "model family" and "masking operator" boxes to the new run's, with the verdicts shown being that
family's under that operator (before, the boxes kept the old run's values while the verdicts were the new run's).

Models: "Build" with its defaults, then any other interaction: the prompt editor below keeps its fields.

A small store written in the card's row format (tests/app/test_report_card_view.py's rows); no model trained (the toy
classifier of the test cache, saved under the Build form's default id, so that Build answers at once)."""
from __future__ import annotations

import time

import pytest
from browser_helpers import (
    NEEDS_CHROMIUM,
    choose_option,
    click_button,
    page_text,
    selected_option,
    serve_app,
    wait_for,
    wait_for_text,
    wait_until_the_script_ends,
    widget_by_label,
)
from card_rows import card_rows, truth_rows

pytestmark = NEEDS_CHROMIUM

#: run -> (family, mechanism, operators): nothing in common between the two runs
RUNS = {"a-first": ("tiny", "graded", ("mask", "delete")), "b-second": ("other-family", "trigger", ("unk",))}
OPERATOR_WORDS = {"mask": "[MASK]", "delete": "delete", "unk": "[UNK]"}


@pytest.fixture(scope="module")
def card_app(tmp_path_factory):
    from engine.results import ResultsStore

    cache, results = tmp_path_factory.mktemp("state_cache"), tmp_path_factory.mktemp("state_results")
    store = ResultsStore(results / "groundtruth")
    for run, (family, mechanism, operators) in RUNS.items():
        model = f"gt-{family}"
        store.write_cell(run, {"model": model, "kind": "truth"},
                         truth_rows(model, 1.0).assign(base_model=family, mechanism=mechanism), {})
        for operator in operators:
            store.write_cell(run, {"model": model, "operator": operator},
                             card_rows(model, 1.0, operator).assign(base_model=family, mechanism=mechanism), {})
    with serve_app(cache, results) as url:
        yield url, results


def _verdicts_of(results, run: str, operator: str) -> list[str]:
    from app.report_card_view import verdicts
    from engine.groundtruth import card_store, judge_table

    return list(verdicts(judge_table(card_store(results / "groundtruth").load(run)), operator)["text"])


def _shown_view(driver) -> dict[str, str]:
    return {"run": selected_option(driver, "Run"), "family": selected_option(driver, "Model family (planted into)"),
            "mechanism": selected_option(driver, "Mechanism"), "operator": selected_option(driver, "Masking operator")}


def _agrees(driver, results, run: str, timeout: float = 60) -> None:
    """The four boxes show `run`'s family, mechanism and an operator of it, and the verdicts on the page are the
    engine's for that run under the operator the box shows (and the section's caption names it)."""
    family, mechanism, operators = RUNS[run]
    deadline = time.time() + timeout
    while True:
        shown = _shown_view(driver)
        text = page_text(driver).replace("\u2060", "")
        operator = next((o for o in operators if OPERATOR_WORDS[o] == shown["operator"]), None)
        ok = (shown["run"] == run and shown["family"] == family and shown["mechanism"] == mechanism
              and operator is not None and f"Operator: {OPERATOR_WORDS[operator]}." in text
              and all(line in text for line in _verdicts_of(results, run, operator)))
        if ok:
            return
        if time.time() > deadline:
            raise AssertionError(f"the boxes show {shown}, not a view of {run} ({family}, {mechanism}, {operators}); "
                                 f"the page says: {text[-1500:]}")
        time.sleep(0.5)


def test_switching_the_report_card_run_moves_every_box_to_the_new_runs_view(card_app, browser):  # noqa: F811
    url, results = card_app
    browser.get(f"{url}/report_card?run=a-first")
    wait_for(browser, "h1", text="Report card")
    wait_for_text(browser, "preferred the true explanation on", timeout=180)
    choose_option(browser, "Masking operator", OPERATOR_WORDS["delete"])
    _agrees(browser, results, "a-first")
    choose_option(browser, "Run", "b-second")
    _agrees(browser, results, "b-second")
    choose_option(browser, "Run", "a-first")  # and back: the first run's own first view, not the second's leftovers
    _agrees(browser, results, "a-first")


# -- Models: "Build" with its defaults, then any other interaction ---------------------------------------------------
@pytest.fixture(scope="module")
def models_app(tmp_path_factory, toy_classifier):
    """A models cache that already holds the Build form's default model id (the toy classifier saved under it), so
    that Build with its defaults answers at once (the model exists) instead of training one."""
    from engine.models import TrainConfig, default_model_id, save_classifier

    cache, results = tmp_path_factory.mktemp("build_cache"), tmp_path_factory.mktemp("build_results")
    default = default_model_id(TrainConfig(base_model="tiny", dataset="rt", strategy="masked", seed=0))
    save_classifier(toy_classifier, default, cache_dir=cache)
    save_classifier(toy_classifier, "toy-other", cache_dir=cache)  # a second row for "Details of" to switch to
    with serve_app(cache, results) as url:
        yield url, default


def _text_area(driver, label: str) -> str:
    from selenium.webdriver.common.by import By

    return widget_by_label(driver, "stTextArea", label).find_element(By.TAG_NAME, "textarea").get_attribute("value")


def test_build_with_its_defaults_leaves_the_prompt_editor_as_it_was(models_app, browser):  # noqa: F811
    """Build with the form's defaults (the model exists: refused at once) draws the rest of the page, and the next
    interaction shows the prompt editor untouched (before, the page stopped at the refusal and the next run drew
    the editor emptied, with a red "Not a usable prompt")."""
    url, default = models_app
    browser.get(f"{url}/models")
    wait_for(browser, "h1", text="Models")
    wait_for_text(browser, "What the model reads", timeout=180)
    wait_until_the_script_ends(browser)
    instruction = _text_area(browser, "Instruction")
    verbalizer = _text_area(browser, "Verbalizer")
    assert instruction and verbalizer
    click_button(browser, "Build")
    wait_for_text(browser, f"{default} already exists", timeout=120)
    wait_until_the_script_ends(browser)
    assert _text_area(browser, "Instruction") == instruction, "the rest of the page is drawn after the refusal"
    choose_option(browser, "Details of", "toy-other")  # the next interaction: any widget outside the form
    wait_until_the_script_ends(browser)
    assert _text_area(browser, "Instruction") == instruction
    assert _text_area(browser, "Verbalizer") == verbalizer
    assert "Not a usable prompt" not in page_text(browser)
