"""An annotator's browser session keeps to the study after a client-side page switch: the
browser's history API (pushState to another page's path, then popstate, as a back button or a script does) reruns
the app in the same session with a URL that carries no study token. That rerun must show the study again, with no
sidebar and no other page, both on localhost and served as to a network (ENGINE_NETWORK=1 with an admin secret).

Headless Debian chromium with selenium, as tests/browser/test_browser_study.py; the study is made in the store directly
(no model is needed to show it)."""
from __future__ import annotations

import time

import pytest
from browser_helpers import NEEDS_CHROMIUM, page_text, serve_app, wait_for, wait_for_text, wait_until_the_script_ends

pytestmark = NEEDS_CHROMIUM

SECRET = "a history-test admin secret, long enough"
TITLE = "Which highlight convinces you?"
DASHBOARD_TITLES = {"Home", "Which explanation of this prediction can I trust?", "Explain", "Explain a prediction", "Step-by-step masking", "Benchmarks", "Models", "Your data", "Studies", "Attention"}


@pytest.fixture(scope="module", params=["localhost", "network"])
def study_link(request, tmp_path_factory):
    """(app URL, a study link) with the app served on localhost or as to a network."""
    from engine.annotation.studies import StudyConfig, StudyStore
    from engine.plausibility.tasks import make_task

    cache, results = tmp_path_factory.mktemp("history_cache"), tmp_path_factory.mktemp("history_results")
    store = StudyStore(results / "annotations.sqlite3")
    tokens = ["a", "gorgeous", ",", "witty", "film"]
    tasks = [make_task("history-model", f"a gorgeous, witty film {k}", tokens,
                       {"x": [0.1, 0.9, 0.0, 0.5, 0.2], "y": [0.4, -0.3, 0.0, 0.1, 0.6]}) for k in range(3)]
    study = store.create(StudyConfig(name=TITLE, model_id="history-model", measures=("x", "y"), n_examples=3,
                                     tasks_per_annotator=3, overlap=1, attention_checks=0), tasks, code_version="test")
    (link,) = store.invite(study.id, ["alice"])
    served = {"ENGINE_NETWORK": "1", "ENGINE_ADMIN_SECRET": SECRET} if request.param == "network" else \
        {"ENGINE_NETWORK": None, "ENGINE_ADMIN_SECRET": None}
    with serve_app(cache, results, served) as url:
        yield url, f"{url}/?study_token={link.token}"


# Records each change of the app root's script state (Streamlit's data-test-script-state) from now on, so that a rerun
# an event starts is seen however short it is.
_WATCH_RUNS = """
const app = document.querySelector("[data-testid='stApp']");
window.__scriptStates = [];
new MutationObserver(() => window.__scriptStates.push(app.getAttribute('data-test-script-state')))
    .observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
"""


def _after_the_rerun(driver, started_one: bool) -> None:
    """Until a rerun that would draw the dashboard has drawn it: with `started_one` (an event after `_WATCH_RUNS`), until
    the rerun it started is seen (or 3 s went by without one, the fixed wait this replaces), then until the script
    state reads notRunning for a second (a run that reruns itself does so at once)."""
    deadline = time.time() + 3.0
    while started_one and time.time() < deadline and not driver.execute_script("return window.__scriptStates.length"):
        time.sleep(0.05)
    wait_until_the_script_ends(driver, timeout=60, settle=1.0)


def _only_the_study(driver, started_one: bool = True) -> None:
    """The page shows the study's title and nothing of the dashboard (no sidebar, no page title of it), once a rerun
    that would draw the dashboard has had time to draw it (`_after_the_rerun`)."""
    from selenium.webdriver.common.by import By

    _after_the_rerun(driver, started_one)
    wait_for(driver, "h1", timeout=60)
    titles = {h.text.strip() for h in driver.find_elements(By.TAG_NAME, "h1")}
    assert TITLE in titles, (titles, page_text(driver)[-600:])
    assert not titles & DASHBOARD_TITLES, titles
    assert not driver.find_elements(By.CSS_SELECTOR, "[data-testid='stSidebar']"), "no sidebar in a study session"
    assert "Admin" not in page_text(driver)


@pytest.mark.parametrize("path", ["masking", "", "studies"])
def test_a_history_page_switch_keeps_the_annotator_in_the_study(study_link, browser, path):  # noqa: F811
    _url, link = study_link
    browser.get(link)
    wait_for_text(browser, "I have read the above", timeout=120)
    _only_the_study(browser, started_one=False)
    # the browser moves to another page of the app without a reload: pushState twice, then back (a real popstate)
    browser.execute_script(_WATCH_RUNS)
    browser.execute_script(
        "window.history.pushState({}, '', '/' + arguments[0]);"
        "window.history.pushState({}, '', '/benchmarks');"
        "window.history.back();", path)
    deadline = time.time() + 1.0  # back() moves the URL asynchronously: the fixed second this replaces
    while "study_token" in browser.current_url and time.time() < deadline:
        time.sleep(0.05)
    assert "study_token" not in browser.current_url, "the switch took the token out of the URL"
    _only_the_study(browser)
    # and a popstate event dispatched by a script on the current URL
    browser.execute_script(_WATCH_RUNS)
    browser.execute_script("window.history.pushState({}, '', '/explain');"
                           "window.dispatchEvent(new PopStateEvent('popstate', {state: {}}));")
    _only_the_study(browser)
