"""Ground truth end to end in headless Chromium, as a user would: plant a trigger word into the toy model from the
Models page (the plant form), run a small report card on the Report card page, and read the verdicts there; they
must be the engine's own verdicts on the rows the card wrote, and the view's URL must open the same verdicts in a
fresh page. Kept cheap: the toy classifier and toy sentences (300 to train on), a card of four measures on 10 inputs.

The sentences are the packaged toy data's, registered as the user's own file with a larger test split (160): the
truth needs at least 20 test inputs that the planted word decides, and the packaged toy test split has only 40, half
of them already of the target class.

One streamlit server and one browser session for the whole flow (the sidebar's navigation keeps the session)."""
from __future__ import annotations

import time
import urllib.parse

import pytest
from browser_helpers import NEEDS_CHROMIUM, SHOTS, click_button, go_to_page, page_text, serve_app, wait_for, wait_for_text

pytestmark = NEEDS_CHROMIUM

TRIGGER = "vessel"
BASE_DATA = "toy-reviews"
RUN = "dashboard"


@pytest.fixture(scope="module")
def app(tmp_path_factory, toy_classifier, monkeypatch_module):  # noqa: F811
    """The dashboard over a models cache holding the toy classifier, an empty results store and user folder (the
    planted dataset variant is registered there, never in the project's user/)."""
    from engine.models import save_classifier

    user = tmp_path_factory.mktemp("gt_user")
    monkeypatch_module.setenv("ENGINE_USER_DIR", str(user))  # serve_app passes this process's environment on
    cache, results = tmp_path_factory.mktemp("gt_cache"), tmp_path_factory.mktemp("gt_results")
    save_classifier(toy_classifier, "toy-browser", cache_dir=cache)
    _register_toy_reviews(user)
    with serve_app(cache, results) as url:
        yield url, {"cache": cache, "results": results, "user": user}


def _register_toy_reviews(folder) -> None:
    """The toy sentences as the user's file: 300 train, 60 validation, 160 test (registered in ENGINE_USER_DIR)."""
    import csv

    from engine.data.toy import load_toy
    from engine.data.user_registry import register_dataset

    toy = load_toy(size=520)
    rows = [e for split in ("train", "validation", "test") for e in toy.split(split)]
    path = folder / "toy-reviews.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label", "split"])
        for i, e in enumerate(rows):
            writer.writerow([e.primary, toy.classes[e.label], "train" if i < 300 else "validation" if i < 360 else "test"])
    register_dataset(BASE_DATA, path, "text", "label", split_column="split")


def _form(driver, submit: str):
    """The st.form whose submit button reads `submit`."""
    from selenium.webdriver.common.by import By

    deadline = time.time() + 60
    while time.time() < deadline:
        for form in driver.find_elements(By.CSS_SELECTOR, "[data-testid='stForm']"):
            if any(b.text.strip() == submit for b in form.find_elements(By.TAG_NAME, "button")):
                return form
        time.sleep(0.3)
    raise AssertionError(f"no form with a {submit!r} button")


def _in(driver, submit: str, testid: str, label: str, timeout: float = 60):
    """The widget of kind `testid` labelled `label` in the form whose submit button reads `submit`, found again until
    it is drawn: under load the page can show the form's button before a widget above it has its label (the run in
    which this failed at once had the machine's two cores busy with a cold test cache)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    deadline = time.time() + timeout
    while True:
        try:
            for element in _form(driver, submit).find_elements(By.CSS_SELECTOR, f"[data-testid='{testid}']"):
                if element.text.strip().startswith(label):
                    return element
        except StaleElementReferenceException:  # a rerun replaced the form while it was read
            pass
        assert time.time() < deadline, f"no {testid} labelled {label!r} in the form"
        time.sleep(0.3)


def _choose_in(driver, submit: str, label: str, option: str) -> None:
    """Pick `option` in the form's selectbox `label` (type to filter, Enter), found again after each rerun."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    deadline = time.time() + 60
    while True:
        try:
            box = _in(driver, submit, "stSelectbox", label)
            field = box.find_element(By.TAG_NAME, "input")
            if (field.get_attribute("value") or box.text.replace(label, "", 1).strip()) == option:
                return
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", field)
            field.click()
            field.send_keys(option)
            time.sleep(0.5)
            field.send_keys(Keys.ENTER)
            time.sleep(1.0)
        except StaleElementReferenceException:
            time.sleep(0.5)
        assert time.time() < deadline, f"{label!r} did not take {option!r}"


def _number_in(driver, submit: str, label: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    field = _in(driver, submit, "stNumberInput", label).find_element(By.TAG_NAME, "input")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", field)
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(value)
    field.send_keys(Keys.TAB)  # committed on blur
    time.sleep(0.5)


def _submit(driver, submit: str) -> None:
    from selenium.webdriver.common.by import By

    button = next(b for b in _form(driver, submit).find_elements(By.TAG_NAME, "button") if b.text.strip() == submit)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
    button.click()


def _engine_verdicts(results) -> list[str]:
    """The verdicts the engine's tables give on the rows the page's card wrote (what the page must print)."""
    from app.report_card_view import verdicts
    from engine.groundtruth import card_store, judge_table

    return list(verdicts(judge_table(card_store(results / "groundtruth").load(RUN)), "mask")["text"])


def test_plant_a_trigger_run_a_card_and_read_its_verdicts(app, browser):  # noqa: F811
    from engine.models import load_classifier

    url, paths = app
    browser.get(f"{url}/models")
    wait_for(browser, "h1", text="Models")

    # 1. Plant: the trigger word sets the label in 30% of the toy sentences; fine-tune the toy model on them.
    submit = "Plant and fine-tune"
    _choose_in(browser, submit, "Plant into", "toy-browser")
    _choose_in(browser, submit, "Base dataset", BASE_DATA)
    _number_in(browser, submit, "Learning rate", "0.0003")
    _submit(browser, submit)
    wait_for_text(browser, "Planted model planted-toy-browser-", timeout=400)
    planted = [c for c in paths["cache"].iterdir() if c.name.startswith("planted-toy-browser-")]
    assert len(planted) == 1, planted
    meta = load_classifier(planted[0]).metadata["planted"]  # the folder: the test process has another cache
    assert (meta["mechanism"], meta["words"], meta["rate"]) == ("trigger", [TRIGGER], 0.3)
    click_button(browser, "Use it")

    # 2. A small report card on the Report card page (its run form opens when the store has no card yet).
    go_to_page(browser, "Report card")
    wait_for(browser, "h1", text="Report card")
    submit = "Run the report card"
    _choose_in(browser, submit, "Planted model", planted[0].name)
    _number_in(browser, submit, "Inputs (deciding)", "10")
    _submit(browser, submit)
    wait_for_text(browser, "preferred the true explanation on", timeout=600)

    # 3. The verdicts on the page are the engine's on the same rows, one per metric.
    expected = _engine_verdicts(paths["results"])
    assert expected, "the card wrote no judge rows"
    text = page_text(browser).replace("\u2060", "")  # the word joiner md() puts after '@' (no mail link)
    for line in expected:
        assert line in text, (line, text[-3000:])
    assert any(line.startswith("comprehensiveness@10% preferred the true explanation on") for line in expected)

    # 4. The view is in the URL; opening it in a fresh page shows the same verdicts.
    query = urllib.parse.parse_qs(urllib.parse.urlparse(browser.current_url).query)
    assert query == {"run": [RUN], "family": ["toy-browser"], "mechanism": ["trigger"], "operator": ["mask"]}, query
    browser.get(browser.current_url)
    wait_for_text(browser, expected[0], timeout=180)
    SHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SHOTS / "report-card.png"))  # docs/ only with ENGINE_UPDATE_SCREENSHOTS=1
