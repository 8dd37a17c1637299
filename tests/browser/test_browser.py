"""End to end in a real headless Chromium (Debian's chromium + chromedriver): `streamlit run
app/main.py` on a loopback port, type a review, press Explain, and check what a person sees.

Screenshots of each page land in a temporary folder, or in docs/ (shown in the README) with
ENGINE_UPDATE_SCREENSHOTS=1: a plain test run must not rewrite tracked files."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "docs" if os.environ.get("ENGINE_UPDATE_SCREENSHOTS") == "1" else Path(tempfile.gettempdir()) / "engine-screenshots"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_app(cache, results):
    """`streamlit run app/main.py` on a free loopback port over the models cache `cache` and the results store
    `results` (annotations go to a database beside the results, never the project's); yields its URL and stops it
    on exit. The server is `python -m streamlit run ...` forked from this test process's server zygote
    (tests/server_zygote.py: the stack is imported once, not once a server) with this process's environment."""
    from server_zygote import log_dir, zygote_for  # here: bench/dashboard.py loads this file without tests/ on its path

    import engine.runtime  # noqa: F401 (its offline defaults, which every server sets at import, are in the environment from the first server on, so one zygote serves every test's)

    port = _free_port()
    env = dict(os.environ, ENGINE_MODELS_CACHE=str(cache), ENGINE_RESULTS_DIR=str(results),
               ENGINE_ANNOTATIONS_DB=str(Path(results) / "annotations.sqlite3"))
    zygote = zygote_for(env)
    fd, out = tempfile.mkstemp(prefix=f"streamlit-{port}-", suffix=".log", dir=log_dir())
    os.close(fd)
    pid = zygote.serve(["run", "app/main.py", "--server.port", str(port), "--server.address", "127.0.0.1",
                        "--server.headless", "true", "--browser.gatherUsageStats", "false"], env, out)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline and zygote.exit_code(pid) is None:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.5)
    else:
        zygote.signal(pid, signal.SIGKILL)
        code = zygote.exit_code(pid, 60)
        pytest.fail(f"streamlit did not come up (exit status {code}): " + Path(out).read_text(errors="replace")[-2000:])
    try:
        yield url
    finally:
        zygote.stop(pid)


@pytest.fixture(scope="module")
def app_url(tmp_path_factory, toy_classifier):
    from engine.models import save_classifier

    cache = tmp_path_factory.mktemp("browser_cache")
    save_classifier(toy_classifier, "toy-browser", cache_dir=cache)
    with serve_app(cache, tmp_path_factory.mktemp("results")) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage", "--window-size=1400,1800"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _wait(driver, css, timeout=120, text=None):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, timeout)
    if text is None:
        return wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, css)))
    return wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))


def _first(find, timeout: float = 60):
    """The first element `find()` returns, polling until the page has drawn it (a rerun draws top down)."""
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.time() + timeout
    while True:
        try:
            found = find()
        except StaleElementReferenceException:  # a rerun replaced an element while it was read
            found = []
        if found:
            return found[0]
        assert time.time() < deadline, "the element was not drawn"
        time.sleep(0.2)


def _explain(driver, text, expect):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    area = _wait(driver, "textarea")
    area.send_keys(Keys.CONTROL, "a")  # React-controlled: clear() does not reach Streamlit's state
    area.send_keys(Keys.DELETE)
    if any(ord(c) > 0xFFFF for c in text):
        # ChromeDriver types only characters of the Basic Multilingual Plane (chrome 150 refuses an emoji): set the
        # React-controlled value through the native setter and send the input event React listens to
        driver.execute_script(
            "Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value').set.call(arguments[0], arguments[1]);"
            "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));", area, text)
    else:
        area.send_keys(text)
    # Streamlit commits a text area on blur: move focus away, then press the button
    driver.find_element(By.TAG_NAME, "h1").click()
    time.sleep(0.5)
    deadline = time.time() + 30
    while not (buttons := _buttons(driver, "Explain")):
        assert time.time() < deadline, "no Explain button on the page"
        time.sleep(0.2)
    button = buttons[0]
    start = time.perf_counter()
    button.click()
    # the page keeps showing the previous result while it reruns: wait for this text's own tokens
    try:
        _wait(driver, ".token-heatmap", text=expect)
    except Exception:
        driver.save_screenshot("/tmp/browser_failure.png")
        from selenium.webdriver.common.by import By as _By
        print("HEATMAPS:", [e.get_attribute("textContent")[:200] for e in driver.find_elements(_By.CSS_SELECTOR, ".token-heatmap")])
        raise
    first = time.perf_counter() - start
    # heatmaps stream in as each measure is done: the run is over when its Cancel button is gone
    deadline = time.time() + 120
    while _buttons(driver, "Cancel"):
        assert time.time() < deadline, "the explanation never finished"
        time.sleep(0.2)
    return first


def _buttons(driver, label):
    """The buttons labelled `label`; one that a rerun removed while being read is skipped (pages stream)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    out = []
    for b in driver.find_elements(By.TAG_NAME, "button"):
        try:
            if b.text.strip() == label:
                out.append(b)
        except StaleElementReferenceException:
            continue
    return out


def test_type_a_review_and_see_the_explanation(app_url, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{app_url}/explain")  # the app opens on the home page
    _wait(browser, "h1", text="Explain a prediction")
    _explain(browser, "the movie was really good and fun", "fun")  # first run loads the model
    elapsed = _explain(browser, "this film was dull and the plot was awful", "awful")
    main = browser.find_element(By.CSS_SELECTOR, "[data-testid='stMain']").text
    assert "Prediction: " in main and "Agreement between measures" in main
    heatmaps = browser.find_elements(By.CSS_SELECTOR, ".token-heatmap")
    assert len(heatmaps) == 4, "one heatmap per default measure"
    # timing is reported, not asserted: the machines are shared (bench/ and the README hold the figures)
    print(f"explain showed its first heatmap in {elapsed:.2f} s after the first load")
    SHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SHOTS / "explain.png"))


def test_markup_in_the_review_is_shown_as_text(app_url, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{app_url}/explain")  # the app opens on the home page
    _wait(browser, "h1", text="Explain a prediction")
    browser.execute_script("window.__pwned = 0;")
    _explain(browser, 'great <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> **bold**', "window")
    time.sleep(1)
    assert browser.execute_script("return window.__pwned") == 0, "no script from the review ran"
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid='stMain'] img[src='x']")
    heatmap_text = " ".join(e.text for e in browser.find_elements(By.CSS_SELECTOR, ".token-heatmap"))
    assert "<" in heatmap_text and "window" in heatmap_text, "the markup shows up as tokens of text"


@pytest.mark.parametrize("page, heading", [("models", "Models"), ("benchmarks", "Benchmarks"), ("masking", "Step-by-step masking"),
                                           ("annotate", "Annotate"), ("attention", "Attention as explanation"),
                                           ("data", "Your data"), ("simulability", "Simulability")])
def test_other_pages_render(app_url, browser, page, heading):
    """Each page runs to its end without an exception: its heading shows, the script finishes, and no
    exception box is on the page (the heading alone renders before a later line of the page fails)."""
    from selenium.webdriver.common.by import By

    browser.get(f"{app_url}/{page}")
    _wait(browser, "h1", text=heading)
    _wait_until_the_script_ends(browser)
    errors = browser.find_elements(By.CSS_SELECTOR, "[data-testid='stException']")
    assert not errors, f"{page}: " + " | ".join(e.text[:600] for e in errors)
    SHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SHOTS / f"{page}.png"))


def _wait_until_the_script_ends(driver, timeout: float = 120, settle: float = 1.0) -> None:
    """Until Streamlit reports its script run finished (the app root's data-test-script-state reads
    'notRunning' for `settle` seconds: a page can rerun itself once right after its first run)."""
    from selenium.webdriver.common.by import By

    deadline, since = time.time() + timeout, None
    while True:
        state = driver.find_element(By.CSS_SELECTOR, "[data-testid='stApp']").get_attribute("data-test-script-state")
        if state == "notRunning":
            since = since or time.time()
            if time.time() - since >= settle:
                return
        else:
            since = None
        assert time.time() < deadline, f"the page's script did not finish in {timeout:g} s (state {state!r})"
        time.sleep(0.2)


def test_annotate_prepares_tasks_with_its_default_measures_on_a_transformer(app_url, browser):
    """On a transformer checkpoint, pressing 'Prepare tasks' with the page's defaults works (the defaults once
    included `attention`, which only the BiLSTM supports, and names of measures that do not exist)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(f"{app_url}/annotate")
    _wait(browser, "h1", text="Annotate")
    _wait(browser, "[data-testid='stMultiSelect']")
    chosen = browser.find_element(By.CSS_SELECTOR, "[data-testid='stMultiSelect']").text
    assert "grad-l2" in chosen and "attention\n" not in chosen + "\n", chosen
    # the page draws top down: the multiselect can be there before the number input and the button below it
    number = _first(lambda: [e for e in browser.find_elements(By.CSS_SELECTOR, "[data-testid='stNumberInput']")
                             if e.text.startswith("Test examples")]).find_element(By.TAG_NAME, "input")
    number.send_keys(Keys.CONTROL, "a")
    number.send_keys("2", Keys.TAB)
    time.sleep(1)
    _first(lambda: [b for b in browser.find_elements(By.TAG_NAME, "button") if b.text.strip() == "Prepare tasks"]).click()
    deadline = time.time() + 180
    while "new tasks" not in (body := browser.find_element(By.TAG_NAME, "body").text):
        assert time.time() < deadline, body[-1500:]
        assert "could not be prepared" not in body, body[-1500:]
        time.sleep(0.5)
    assert "2 new tasks" in body
