"""What the browser tests share (tests/browser/): the headless Chromium they drive, the Streamlit server they drive it
against (`serve_app`, forked from the server zygote), the waits for what a streaming page draws, and the widget
helpers more than one browser test module uses (find a widget by its label, type, choose, click, read the page; a
helper of one module stays private in that module).

Self-contained (the standard library; selenium and the server zygote imported where used): bench/dashboard.py loads
this file by path, without tests/ on its path. The `browser` fixture (tests/conftest.py) is `chromium()`."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "docs" if os.environ.get("ENGINE_UPDATE_SCREENSHOTS") == "1" else Path(tempfile.gettempdir()) / "engine-screenshots"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
#: `chromium()` window sizes (width,height in CSS pixels) the modules share: the Explain page and its exports drawn
#: tall enough for a long page's screenshot, and a laptop's browser window (1200 px wide)
TALL_WINDOW, LAPTOP_WINDOW = "1400,2200", "1200,1600"
#: each browser module's `pytestmark`: skipped (and named at the end of the run) where Chromium is not installed
NEEDS_CHROMIUM = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
)


def chromium(window: str = "1400,1800", downloads: Path | None = None):
    """A headless Chromium through chromedriver, `window` (width,height) in CSS pixels; with `downloads`, files it
    downloads land in that folder without a prompt. The caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage", f"--window-size={window}"):
        options.add_argument(flag)
    if downloads is not None:
        options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                                  "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    if downloads is not None:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    return driver


def free_port() -> int:
    """A loopback port free at the time of the call (the servers the tests and bench/dashboard.py start)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def save_with_metadata(classifier, model_id: str, cache: Path, **metadata) -> None:
    """Save `classifier` as `model_id` in `cache`, then overwrite these keys of its metadata.json (e.g. dataset="rt",
    so a toy model stands in for a shipped checkpoint of that data)."""
    import json

    from engine.models import save_classifier

    save_classifier(classifier, model_id, cache_dir=cache)
    if metadata:
        path = cache / model_id / "metadata.json"
        path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), **metadata}), encoding="utf-8")


@contextlib.contextmanager
def serve_saved(tmp_path_factory, classifier, model_id: str):
    """A dashboard server over a fresh models cache holding only `classifier` as `model_id` and an empty results
    folder; yields its URL."""
    cache = tmp_path_factory.mktemp(f"{model_id}_cache")
    save_with_metadata(classifier, model_id, cache)
    with serve_app(cache, tmp_path_factory.mktemp(f"{model_id}_results")) as url:
        yield url


@contextlib.contextmanager
def serve_app(cache, results, environ: dict[str, str | None] | None = None):
    """`streamlit run app/main.py` on a free loopback port over the models cache `cache` and the results store
    `results` (annotations go to a database beside the results, never the project's); yields its URL and stops it
    on exit. `environ`: variables the server gets beside this process's (None: the server does not get it), e.g.
    {"ENGINE_NETWORK": "1", "ENGINE_ADMIN_SECRET": ...} to serve as to a network. The server is `python -m streamlit run ...` forked from this test process's server zygote
    (tests/server_zygote.py: the stack is imported once, not once a server) with this process's environment."""
    from server_zygote import log_dir, zygote_for  # here: bench/dashboard.py loads this file without tests/ on its path

    import engine.runtime  # noqa: F401 (its offline defaults, which every server sets at import, are in the environment from the first server on, so one zygote serves every test's)

    port = free_port()
    env = dict(os.environ, ENGINE_MODELS_CACHE=str(cache), ENGINE_RESULTS_DIR=str(results),
               ENGINE_ANNOTATIONS_DB=str(Path(results) / "annotations.sqlite3"))
    for name, value in (environ or {}).items():
        env.pop(name, None) if value is None else env.__setitem__(name, value)
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


#: What the page-side reads count as shown, as Selenium's `element.text` does: rendered, not visibility:hidden, not
#: fully transparent. Why the helpers read through scripts: `element.text` runs WebDriver's visibility atom over every
#: node below the element, one round trip per element, where one script reading `innerText` costs the browser a
#: tenth to a seventieth of that (a read of the home page: 50 against 3 ms; of Benchmarks: 302 against 4 ms), and the
#: helpers poll.
_SHOWN_JS = "const shown = e => e.checkVisibility({visibilityProperty: true, opacityProperty: true});"


def as_read(inner_text: str) -> str:
    """`innerText` as `element.text` reads it: a no-break space as a space, each line stripped, no empty line (a
    paragraph's margins add one)."""
    lines = (line.strip() for line in inner_text.replace("\xa0", " ").split("\n"))
    return "\n".join(line for line in lines if line)


def text_of(driver, element=None) -> str:
    """The text `element` (default: the page's body) shows, as `element.text` reads it (`as_read`), in one script
    call; empty for an element not shown."""
    return as_read(driver.execute_script(
        _SHOWN_JS + "const e = arguments[0] || document.body; return shown(e) ? e.innerText : '';", element))


def texts_of(driver, css: str) -> list[str]:
    """The text each element matching `css` shows (`text_of`; empty for one not shown), in page order, in one
    script call."""
    return [as_read(text) for text in driver.execute_script(
        _SHOWN_JS + "return [...document.querySelectorAll(arguments[0])].map(e => shown(e) ? e.innerText : '');", css)]


def elements_showing(driver, css: str, text: str, *, exact: bool = True, last_line: bool = False) -> list:
    """The shown elements matching `css` whose text, stripped, is `text` (exact) or starts with it; with `last_line`,
    whose last line is `text` (an icon writes its name on a line above a label). One script call, in page order."""
    return driver.execute_script(
        _SHOWN_JS + r"""
        const [css, text, exact, lastLine] = arguments;
        return [...document.querySelectorAll(css)].filter(e => {
            if (!shown(e)) return false;
            const lines = e.innerText.replace(/\u00a0/g, ' ').split('\n').map(l => l.trim()).filter(l => l);
            const t = lastLine ? (lines.pop() || '') : lines.join('\n');
            return exact ? t === text : t.startsWith(text);
        });""", css, text, exact, last_line)


def wait_for(driver, css, timeout=120, text=None):
    """The first element matching `css` once the page has it (with `text`: once that element shows `text`; then
    True), waiting at most `timeout` seconds."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, timeout, poll_frequency=0.1)  # a read is one cheap script call (`text_of`)
    if text is None:
        return wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, css)))
    # the first element matching `css` showing `text` (what EC.text_to_be_present_in_element checks, in one script call)
    return wait.until(lambda d: text in (texts_of(d, css) or [""])[0])


def explain_in_page(driver, text, expect):
    """Type `text` into the Explain page's text area and press Explain; seconds from the click until a heatmap shows
    `expect` (a word of `text`: the previous result stays drawn while the page reruns), returned once every measure
    is done (the Cancel button gone). What the timing test and bench/dashboard.py measure."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    area = wait_for(driver, "textarea")
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
    while not (buttons := buttons_labelled(driver, "Explain")):
        assert time.time() < deadline, "no Explain button on the page"
        time.sleep(0.2)
    button = buttons[0]
    start = time.perf_counter()
    button.click()
    # the page keeps showing the previous result while it reruns: wait for this text's own tokens
    try:
        wait_for(driver, ".token-heatmap", text=expect)
    except Exception:
        driver.save_screenshot("/tmp/browser_failure.png")
        from selenium.webdriver.common.by import By as _By
        print("HEATMAPS:", [e.get_attribute("textContent")[:200] for e in driver.find_elements(_By.CSS_SELECTOR, ".token-heatmap")])
        raise
    first = time.perf_counter() - start
    # heatmaps stream in as each measure is done: the run is over when its Cancel button is gone
    deadline = time.time() + 120
    while buttons_labelled(driver, "Cancel"):
        assert time.time() < deadline, "the explanation never finished"
        time.sleep(0.2)
    return first


def buttons_labelled(driver, label):
    """The shown buttons labelled `label`, read in one script call (pages stream: a rerun cannot remove one halfway)."""
    return elements_showing(driver, "button", label)


def wait_until_the_script_ends(driver, timeout: float = 120, settle: float = 1.0) -> None:
    """Until Streamlit reports its script run finished (the app root's data-test-script-state reads
    'notRunning' for `settle` seconds: a page can rerun itself once right after its first run)."""
    deadline, since = time.time() + timeout, None
    while True:
        state = driver.execute_script(
            "const app = document.querySelector(\"[data-testid='stApp']\"); return app && app.getAttribute('data-test-script-state');")
        if state == "notRunning":
            since = since or time.time()
            if time.time() - since >= settle:
                return
        else:
            since = None
        assert time.time() < deadline, f"the page's script did not finish in {timeout:g} s (state {state!r})"
        time.sleep(0.2)


def widget_by_label(driver, testid: str, label: str):
    """The widget container (data-testid) whose label reads `label`."""
    deadline = time.time() + 60
    while time.time() < deadline:
        found = elements_showing(driver, f"[data-testid='{testid}']", label, exact=False)
        if found:
            return found[0]
        time.sleep(0.3)
    raise AssertionError(f"no {testid} labelled {label!r}")


def type_into(driver, label: str, text: str) -> None:
    """Replace what the text input labelled `label` holds with `text`, then move focus away (Streamlit commits a
    text input on blur)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = widget_by_label(driver, "stTextInput", label).find_element(By.TAG_NAME, "input")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(text)
    box.send_keys(Keys.TAB)  # Streamlit commits a text input on blur


def selected_option(driver, label: str) -> str:
    """The option a selectbox shows as chosen (its search field holds it; the element text is only the label)."""
    from selenium.webdriver.common.by import By

    box = widget_by_label(driver, "stSelectbox", label)
    value = box.find_element(By.TAG_NAME, "input").get_attribute("value")
    return value or box.get_attribute("textContent").replace(label, "", 1).strip()


def choose_option(driver, label: str, option: str, timeout: float = 60) -> None:
    """Pick `option` in the selectbox labelled `label` (type to filter, Enter to choose) and wait until the box shows
    it, polling (a box shows its new value before the rerun it starts ends); not taken within 3 s, type it again.
    A rerun can replace the widget's element while we type: then find it again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    deadline = time.time() + timeout
    while True:
        try:
            if selected_option(driver, label) == option:
                return
            field = widget_by_label(driver, "stSelectbox", label).find_element(By.TAG_NAME, "input")
            field.click()
            field.send_keys(option)
            field.send_keys(Keys.ENTER)
            for _ in range(20):
                if selected_option(driver, label) == option:
                    return
                time.sleep(0.15)
        except StaleElementReferenceException:
            time.sleep(0.2)
        if time.time() > deadline:
            driver.save_screenshot("/tmp/browser_own_failure.png")
            raise AssertionError(f"{label!r} did not take {option!r}: it shows {selected_option(driver, label)!r}")


def click_button(driver, text: str, timeout: float = 60) -> None:
    """Click the first enabled button labelled `text`, retrying until the page has drawn it clickable."""
    from selenium.common.exceptions import (
        ElementClickInterceptedException,
        ElementNotInteractableException,
        StaleElementReferenceException,
    )

    deadline = time.time() + timeout
    while True:
        try:
            buttons = [b for b in buttons_labelled(driver, text) if b.is_enabled()]
            if buttons:
                buttons[0].click()
                return
        except StaleElementReferenceException:  # a rerun replaced the button while it was read (Explain streams)
            pass
        except (ElementNotInteractableException, ElementClickInterceptedException):
            pass  # drawn but not yet clickable (an expander still opening, a rerun's overlay): try again
        assert time.time() < deadline, f"no button {text!r}"
        time.sleep(0.3)


def displayed_button(driver, label, timeout=60):
    """The first displayed button whose last line reads `label` (an icon adds its name on a line above), waiting
    at most `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = elements_showing(driver, "button", label, last_line=True)  # an icon adds its name on a line above
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no button {label!r} on the page")


def go_to_page(driver, title: str) -> None:
    """Go to a page through the sidebar's navigation (keeps this browser session's state)."""
    from selenium.webdriver.common.by import By

    anchors = driver.find_elements(By.CSS_SELECTOR, "[data-testid='stSidebar'] a")
    links = [a for a in anchors if a.text.strip().splitlines()[-1:] == [title]]  # the text starts with the icon's name
    assert links, f"no page {title!r} in the sidebar: {[a.text for a in anchors]}"
    links[0].click()
    time.sleep(1)


def page_text(driver) -> str:
    """The text the page shows (its body's; `text_of`)."""
    return text_of(driver)


def wait_for_text(driver, text: str, timeout: float = 240) -> None:
    """Until the page shows `text`; past `timeout` seconds, a screenshot and an error with the page's last text."""
    deadline = time.time() + timeout
    while text not in page_text(driver):
        if time.time() > deadline:
            driver.save_screenshot("/tmp/browser_own_failure.png")
            raise AssertionError(f"{text!r} never appeared; the page says: {page_text(driver)[-1500:]}")
        time.sleep(0.5)


def wait_until(condition, timeout: float, what: str, driver):
    """`condition()`'s value once it is true, polling; past `timeout` seconds, a screenshot and an error saying
    `what` with the page's last text."""
    deadline = time.time() + timeout
    while not (value := condition()):
        if time.time() > deadline:
            driver.save_screenshot("/tmp/browser_llm_failure.png")
            raise AssertionError(f"{what}; the page says: {page_text(driver)[-1500:]}")
        time.sleep(0.3)
    return value


def prompt_preview(driver) -> str:
    """The text of the page's prompt previews (pre.prompt-preview); empty while a rerun replaces them."""
    return " ".join(text for text in texts_of(driver, "pre.prompt-preview") if text)


def ranking_links(driver) -> list[tuple[str, str]]:
    """(label, href) of the page's links into Explain that carry a measure, in page order (the home page's ranking)."""
    pairs = driver.execute_script(
        _SHOWN_JS + "return [...document.querySelectorAll(\"[data-testid='stMain'] a\")]"
        ".map(a => [shown(a) ? a.innerText : '', a.href || '']);")
    return [(as_read(text), href) for text, href in pairs if "/explain?" in href and "measures=" in href]


def wait_for_links(driver, timeout: float = 90) -> list[tuple[str, str]]:
    """The ranking's links once the page has drawn at least one."""
    deadline = time.time() + timeout
    while not (links := ranking_links(driver)):
        assert time.time() < deadline, "no ranked measure links: " + page_text(driver)[-1500:]
        time.sleep(0.3)
    return links


def linked_measures(links: list[tuple[str, str]]) -> list[str]:
    """The measure each (label, href) link into Explain opens with, in page order."""
    return [urllib.parse.parse_qs(urllib.parse.urlparse(h).query)["measures"][0] for _, h in links]


def wait_for_links_in_order(driver, order: list[str], timeout: float = 60) -> list[tuple[str, str]]:
    """The ranking's links once the page has drawn them all: read until they name `order` or `timeout` passes (the
    page streams, and a rerun redraws the table: a read in between saw 6 of the 8, out of order). Returns the last
    read; the caller asserts its order, so a wrong one still fails once the page has settled."""
    deadline = time.time() + timeout
    while True:
        links = wait_for_links(driver)
        if linked_measures(links) == order or time.time() > deadline:
            return links
        time.sleep(0.5)
