"""A plausibility study end to end in headless Chromium, served as to a network (ENGINE_NETWORK=1 with an admin
secret): the admin signs in, creates a study with overlap 2 and invites three annotators; each opens their link
in a browser of their own, consents and answers one task at a time; one fails the attention check. The admin
then sees every task answered exactly twice, that annotator flagged, the ratings and the agreement. An
annotator's browser reaches no other page by URL; a made-up link and a closed study are refused; markup and
formula text in the study's name, instructions and a comment are shown as text.

One streamlit server for the module; the admin's browser keeps its session (sidebar clicks, no reloads: a
reload is a new session and would have to sign in again)."""
from __future__ import annotations

import re
import time

import pytest
from browser_helpers import (
    LAPTOP_WINDOW,
    NEEDS_CHROMIUM,
    choose_option,
    chromium,
    click_button,
    go_to_page,
    page_text,
    serve_app,
    type_into,
    wait_for,
    wait_for_text,
    widget_by_label,
)

pytestmark = NEEDS_CHROMIUM

SECRET = "an admin secret long enough"
MODEL_ID = "toy-study"
NAME = '<img src=x onerror=alert(1)> =HYPERLINK("http://evil.example") **Study** [go](http://evil.example)'
INSTRUCTIONS = '<script>alert(2)</script> Rank them. [click](http://evil.example) =1+2'
COMMENT = '=cmd|" /C calc"!A0 <b>bold</b> <img src=x onerror=alert(3)>'
MIN_SECONDS = 2.3  # over the quality module's 2 s median: only the attention check flags an annotator here


@pytest.fixture(scope="module")
def study_app(tmp_path_factory, toy_classifier):
    """The dashboard served as to a network, with the admin secret; yields (url, annotations database)."""
    from engine.models import save_classifier

    cache, results = tmp_path_factory.mktemp("study_cache"), tmp_path_factory.mktemp("study_results")
    save_classifier(toy_classifier, MODEL_ID, cache_dir=cache)
    with serve_app(cache, results, {"ENGINE_NETWORK": "1", "ENGINE_ADMIN_SECRET": SECRET}) as url:
        yield url, results / "annotations.sqlite3"


def _driver():
    return chromium(LAPTOP_WINDOW)


def _clean(text: str) -> str:
    return text.replace("\u2060", "")  # the word joiner md() puts after a URL scheme


def _area(driver, label: str, text: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = widget_by_label(driver, "stTextArea", label).find_element(By.TAG_NAME, "textarea")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(text)
    box.send_keys(Keys.TAB)


def _number(driver, label: str, value: int) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = widget_by_label(driver, "stNumberInput", label).find_element(By.TAG_NAME, "input")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(str(value))
    box.send_keys(Keys.TAB)


def _no_markup_rendered(driver) -> None:
    """No element, link or image came out of user text: it is all on the page as characters."""
    from selenium.webdriver.common.by import By

    main = driver.find_element(By.CSS_SELECTOR, "[data-testid='stMain']")
    assert not main.find_elements(By.CSS_SELECTOR, "img[onerror], img[src='x'], script, b")
    links = [a.get_dom_attribute("href") or "" for a in main.find_elements(By.TAG_NAME, "a")]
    assert not [h for h in links if "evil" in h and not h.startswith("#")], links


def _metrics(driver) -> dict[str, str]:
    """Label -> value of every st.metric on the page (a metric being redrawn is skipped)."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By

    out = {}
    for m in driver.find_elements(By.CSS_SELECTOR, "[data-testid='stMetric']"):
        try:
            label = m.find_element(By.CSS_SELECTOR, "[data-testid='stMetricLabel']").text.strip().splitlines()
            out[label[0] if label else ""] = m.find_element(By.CSS_SELECTOR, "[data-testid='stMetricValue']").text.strip()
        except (NoSuchElementException, StaleElementReferenceException):
            continue
    return out


def _click_label(driver, text: str, timeout: float = 60) -> None:
    """Click the checkbox whose label contains `text` once it is drawn (elements arrive one by one)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    deadline = time.time() + timeout
    while True:
        try:
            found = driver.find_elements(By.XPATH, f"//label[contains(., '{text}')]")
            if found:
                found[0].click()
                return
        except StaleElementReferenceException:
            pass
        assert time.time() < deadline, f"no checkbox {text!r}"
        time.sleep(0.3)


def _sidebar_links(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return [a.text.strip().splitlines()[-1] for a in driver.find_elements(By.CSS_SELECTOR, "[data-testid='stSidebar'] a")
            if a.text.strip()]


def _answer(driver, fail_check: bool, comment: str | None) -> bool:
    """Answer the task on the page (ranking A, B, C in order, or what an attention check asks, or, with
    `fail_check`, another explanation first). Returns whether the item was an attention check."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    text = page_text(driver)
    check = re.search(r"put explanation ([A-Z]) first", text)
    slots = sorted({m for m in re.findall(r"Rank of ([A-Z])", text)})
    assert len(slots) >= 2, text[-800:]
    if check:
        first = check.group(1)
        if fail_check:
            first = next(s for s in slots if s != first)
        ranks = {s: 1 if s == first else 2 for s in slots}
    else:
        ranks = {s: i + 1 for i, s in enumerate(slots)}
    for slot, rank in ranks.items():
        choose_option(driver, f"Rank of {slot}", str(rank))
    if comment:
        _area(driver, "Comment (optional)", comment)
    progress = driver.find_element(By.CSS_SELECTOR, "[data-testid='stProgress']").text
    click_button(driver, "Submit and continue")
    deadline = time.time() + 60
    while True:  # the next task's progress line, or the done page
        time.sleep(0.3)
        body = page_text(driver)
        try:
            bars = [b.text for b in driver.find_elements(By.CSS_SELECTOR, "[data-testid='stProgress']")]
        except StaleElementReferenceException:  # the rerun replaced the bar between finding and reading it: look again
            bars = []
        if "Thank you" in body or (bars and bars[0] != progress):
            return bool(check)
        assert time.time() < deadline, f"the answer was not taken: {body[-800:]}"


def test_three_annotators_finish_a_study_the_admin_sees_every_task_twice_and_the_checks(study_app, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    from engine.annotation.studies import StudyStore
    from engine.annotation.studies.results import answers_csv

    url, db = study_app
    admin = browser
    admin.get(url)
    wait_for(admin, "h1", text="Which explanation of this prediction can I trust?")  # the home page
    assert not {"Models", "Your data", "Studies"} & set(_sidebar_links(admin)), "a visitor sees no admin page"
    admin.find_element(By.XPATH, "//*[@data-testid='stSidebar']//summary[contains(., 'Admin')]").click()
    type_into(admin, "Admin secret", SECRET)
    click_button(admin, "Sign in")
    wait_for_text(admin, "Signed in as the admin", timeout=60)
    go_to_page(admin, "Studies")
    wait_for(admin, "h1", text="Studies")

    # create: 3 tasks, 2 per annotator, overlap 2, 1 instructed check each -> 3 annotators needed
    type_into(admin, "Study name (annotators see it)", NAME)
    _area(admin, "Instructions", INSTRUCTIONS)
    _number(admin, "Examples (first N of the test split)", 3)
    _number(admin, "Tasks per annotator", 2)
    click_button(admin, "Create study")
    wait_for_text(admin, "Annotators, one name per line", timeout=120)
    _area(admin, "Annotators, one name per line", "alice\nbob\ncarol")
    click_button(admin, "Create links")
    deadline = time.time() + 60
    while len(codes := admin.find_elements(By.CSS_SELECTOR, "[data-testid='stCode'] code")) < 3:
        assert time.time() < deadline, page_text(admin)[-800:]
        time.sleep(0.3)
    links = [c.text.strip() for c in codes]
    assert all(link.startswith(f"{url}/?study_token=") for link in links), links
    _no_markup_rendered(admin)
    assert _clean(admin.find_element(By.CSS_SELECTOR, "[data-testid='stMain'] h3").text) == NAME

    annotators = {name: _driver() for name in ("alice", "bob", "carol")}
    try:
        for driver, link in zip(annotators.values(), links):
            driver.get(link)
            wait_for(driver, "h1", text="Study")
            assert _clean(driver.find_element(By.TAG_NAME, "h1").text) == NAME, "the name is shown as typed"
            wait_for_text(driver, "Rank them.")
            assert INSTRUCTIONS in _clean(page_text(driver)) and "<script>" in page_text(driver)
            _no_markup_rendered(driver)
            assert not driver.find_elements(By.CSS_SELECTOR, "[data-testid='stSidebar']"), "no sidebar"
            assert MODEL_ID not in page_text(driver) and "/tmp" not in page_text(driver)
            _click_label(driver, "I have read the above")
            click_button(driver, "Start")
            wait_for_text(driver, "Submit and continue")
        shown_at = {name: time.time() for name in annotators}
        done, checks = set(), {}
        while len(done) < 3:  # round robin: one answer per annotator in turn
            for name, driver in annotators.items():
                if name in done:
                    continue
                text = page_text(driver)
                assert MODEL_ID not in text and "grad" not in text and "loo-sign" not in text, "no model or measure names"
                time.sleep(max(0.0, MIN_SECONDS - (time.time() - shown_at[name])))
                was_check = _answer(driver, fail_check=name == "carol",
                                    comment=COMMENT if name == "alice" and not checks else None)
                checks[name] = checks.get(name, 0) + was_check
                shown_at[name] = time.time()
                if "Thank you" in page_text(driver):
                    done.add(name)
        assert checks == {"alice": 1, "bob": 1, "carol": 1}
        for driver in annotators.values():
            assert "3 of 3 answered" in page_text(driver)
            assert "completion code" not in page_text(driver), "a personal link needs no completion code"

        # the admin's view: every task answered twice, carol flagged, ratings and agreement
        go_to_page(admin, "Studies")
        wait_for_text(admin, "Answers per task: 2 answers: 3 tasks", timeout=60)
        wait_for_text(admin, "From 3 annotators", timeout=60)  # elements arrive in order: all above it are drawn
        main = _clean(page_text(admin))
        assert "3 of 3" in main and "over the overlap" not in main
        assert "Flagged: carol: failed 1 of 1 attention checks" in main
        assert "Flagged: alice" not in main and "Flagged: bob" not in main
        assert "From 3 annotators; 95% intervals by bootstrap over annotators (200 draws" in main
        deadline = time.time() + 60
        while (metrics := _metrics(admin)).get("Kendall's W") in (None, "n/a"):  # the page may still be drawing
            assert time.time() < deadline, metrics
            time.sleep(0.5)
        assert metrics["Tasks complete"] == "3 of 3" and metrics["Answers (checks included)"] == "9"
        assert metrics.get("Kendall's W") == "1.000", metrics  # the two answers to each task agree
        assert re.fullmatch(r"-?\d\.\d{3}", metrics["Krippendorff's alpha (rankings)"]), metrics
        assert len(admin.find_elements(By.CSS_SELECTOR, "[data-testid='stDataFrame']")) >= 3  # annotators + 2 ratings
        assert f"alice: {COMMENT}" in main, "a comment is shown as typed"
        _no_markup_rendered(admin)

        studies = StudyStore(db)
        (study,) = studies.studies()
        status = studies.status(study.id)
        assert sorted(status.coverage.values()) == [2, 2, 2] and status.over == 0
        assert "'=cmd" in answers_csv(studies, study.id), "the export neutralises the comment's formula"

        # an annotator's browser reaches no other page by URL, and keeps to the study with its token
        alice = annotators["alice"]
        for path, title in (("models", "Models"), ("data", "Your data"), ("studies", "Studies")):
            alice.get(f"{url}/{path}")
            wait_for(alice, "h1")
            time.sleep(1.0)
            assert title not in [h.text for h in alice.find_elements(By.TAG_NAME, "h1")]
            assert title not in _sidebar_links(alice)
            alice.get(f"{url}/{path}?study_token={links[0].split('study_token=')[1]}")
            wait_for_text(alice, "Thank you")
            assert not alice.find_elements(By.CSS_SELECTOR, "[data-testid='stSidebar']")
            assert title not in [h.text for h in alice.find_elements(By.TAG_NAME, "h1")]

        # a made-up link is refused with nothing of any study
        alice.get(f"{url}/?study_token=made-up-token-0123456789")
        wait_for_text(alice, "this study link is not valid")
        assert "HYPERLINK" not in page_text(alice) and "Rank" not in page_text(alice)

        # the admin excludes carol: the ratings come from two annotators
        _choose_multi(admin, "Excluded annotators", "carol")
        click_button(admin, "Save exclusions")
        wait_for_text(admin, "From 2 annotators", timeout=60)

        # closed: the links are refused
        click_button(admin, "Close the study")
        wait_for_text(admin, "Reopen the study", timeout=60)
        bob = annotators["bob"]
        bob.get(links[1])
        wait_for_text(bob, "this study is closed")
        assert "HYPERLINK" not in page_text(bob) and "Rank" not in page_text(bob)
    finally:
        for driver in annotators.values():
            driver.quit()


def _choose_multi(driver, label: str, option: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    field = widget_by_label(driver, "stMultiSelect", label).find_element(By.TAG_NAME, "input")
    field.click()
    field.send_keys(option)
    time.sleep(0.5)
    field.send_keys(Keys.ENTER)
    field.send_keys(Keys.ESCAPE)
    time.sleep(0.5)
