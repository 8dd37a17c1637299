"""Screenshots of every page of the dashboard, fully rendered, for docs/dashboard.md and the README.

Starts the dashboard with the README's start command (`bash scripts/start.sh`, headless, on a free loopback port),
opens every page of the admin's navigation in headless Chromium (Debian's chromium + chromedriver) with the chosen
model, waits until the page has settled (its script run ended and stayed ended for a while, no spinner, no progress
bar short of full, no "Running" in the status widget, every plotly chart drawn), then widens the window to the page's full height and saves a
full-page PNG per page. Explain opens on an explained text (with two models side by side where a second model is
given), Masking on a masked one with three measures to compare, Benchmarks on its summary.

    python scripts/tools/screenshots.py                                 # docs/screenshots/, the sidebar's default model
    python scripts/tools/screenshots.py --model gt-tiny-rt-threshold --second tiny-rt-masked-s0
    python scripts/tools/screenshots.py --out /tmp/shots --pages home explain
    python scripts/tools/screenshots.py --smoke                         # CI: the smoke checkpoint, Home and Explain

The models and results are the environment's (ENGINE_MODELS_CACHE, ENGINE_RESULTS_DIR); nothing is written but the
PNGs.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = "an unredeemable mess, but the cast is wonderful and the last act is a joy"
WIDTH = 1400


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_dashboard(port: int, smoke: bool) -> subprocess.Popen:
    """The README's start command on `port`, headless; in smoke mode what it runs (app.serve), since start.sh's own
    smoke mode stops the server once it answers. Its own process group, so that stopping it stops its children."""
    serve = ["--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    command = ([sys.executable, "-m", "app.serve", "--server.address", "127.0.0.1", *serve] if smoke
               else ["bash", "scripts/start.sh", *serve])
    env = {k: v for k, v in os.environ.items() if k != "ENGINE_SMOKE"} if not smoke else dict(os.environ)
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 600  # start.sh may build the default model first on a fresh clone
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the dashboard exited with {proc.returncode} before it answered")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                return proc
        except OSError:
            time.sleep(0.5)
    stop_dashboard(proc)
    raise SystemExit("the dashboard did not answer within 600 s")


def stop_dashboard(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)


def new_driver():
    import shutil

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and chromedriver):
        raise SystemExit("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                 f"--window-size={WIDTH},1600"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(chromedriver), options=options)


def _busy(driver) -> str | None:
    """Why the page is not settled yet, or None: its script runs, a spinner or a progress bar short of full is drawn,
    the status widget says Running, or a plotly chart has not drawn its plot yet."""
    from selenium.webdriver.common.by import By

    apps = driver.find_elements(By.CSS_SELECTOR, "[data-testid='stApp']")
    if not apps or apps[0].get_attribute("data-test-script-state") != "notRunning":
        return "script running"
    if not driver.find_elements(By.CSS_SELECTOR, "[data-testid='stMain'] h1"):
        return "nothing drawn yet"
    if driver.find_elements(By.CSS_SELECTOR, "[data-testid='stSpinner']"):
        return "a spinner"
    # a bar left full ("done") is the page's record of a finished run; one short of full is work still going
    bars = driver.find_elements(By.CSS_SELECTOR, "[data-testid='stProgress'] [role='progressbar']")
    if any(float(b.get_attribute("aria-valuenow") or 0) < float(b.get_attribute("aria-valuemax") or 100) for b in bars):
        return "a progress bar short of full"
    status = driver.find_elements(By.CSS_SELECTOR, "[data-testid='stStatusWidget']")
    if status and "Running" in status[0].text:
        return "Running"
    charts = driver.find_elements(By.CSS_SELECTOR, "[data-testid='stPlotlyChart']")
    if len(driver.find_elements(By.CSS_SELECTOR, "[data-testid='stPlotlyChart'] .main-svg")) < len(charts):
        return "a chart not drawn"
    return None


def wait_settled(driver, timeout: float, settle: float = 2.0) -> None:
    """Until `_busy` has read None for `settle` seconds in a row (a page may rerun itself once after its first run)."""
    start, since = time.time(), None
    while True:
        why = _busy(driver)
        now = time.time()
        if why is None:
            since = since or now
            if now - since >= settle:
                return
        else:
            since = None
        if now - start > timeout:
            raise TimeoutError(f"{driver.current_url}: not settled after {timeout:g} s ({why})")
        time.sleep(0.25)


def full_page_png(driver, path: Path, timeout: float) -> None:
    """Widen the window to the main block's full height (Streamlit scrolls inside it, so the document is one window
    high), wait until the page has settled again at that size, and save it."""
    height = driver.execute_script(
        "const m = document.querySelector('[data-testid=\"stMain\"]');"
        "const b = document.querySelector('[data-testid=\"stMainBlockContainer\"]') || m;"
        "return Math.max(b ? b.scrollHeight + 160 : 0, m ? m.scrollHeight : 0, document.body.scrollHeight);")
    driver.set_window_size(WIDTH, min(max(int(height), 900), 16000))
    time.sleep(1.0)
    wait_settled(driver, timeout, settle=1.0)
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))


def page_urls(url: str, model: str | None, second: str | None, pages: list[str] | None) -> list[tuple[str, str]]:
    """(file stem, URL) of every page of the admin's navigation (or those named), each with the model and, for
    Explain and Masking, a text to show explained."""
    from app.availability import PAGES

    out = []
    for page in PAGES:
        if not page.file or "admin" not in page.roles or (pages and page.key not in pages):
            continue
        path = "" if page.key == "home" else (page.url_path or page.file.removesuffix(".py"))
        query = {"model": model} if model else {}
        if page.key == "explain":
            query.update({"text": TEXT, "measures": "grad-l2,x-grad-sign,ig-sign,loo-sign"})
            if second:
                query["compare"] = second
        elif page.key == "masking":
            query.update({"text": TEXT, "measure": "loo-sign", "compare": "ig-sign,grad-l2"})
        out.append((page.key, f"{url}/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")))
    return out


def error_boxes(driver) -> int:
    """Exception boxes on the page (a traceback, or the redacted "This app has encountered an error")."""
    from selenium.webdriver.common.by import By

    return len(driver.find_elements(By.CSS_SELECTOR, "[data-testid='stException']")) + (
        "This app has encountered an error" in driver.find_element(By.TAG_NAME, "body").text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="the sidebar's model (a checkpoint id; default: the sidebar's own default)")
    p.add_argument("--second", help="a second model for Explain's side-by-side view")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots", help="folder for the PNGs")
    p.add_argument("--pages", nargs="*", help="page keys (home, explain, masking, benchmarks, ...; default: all)")
    p.add_argument("--timeout", type=float, default=300, help="seconds a page may take to settle")
    p.add_argument("--smoke", action="store_true", help="CI: the smoke checkpoint in scratch folders, Home and "
                                                        "Explain, into a scratch folder")
    args = p.parse_args()
    if args.smoke:
        from engine.smoke import smoke_checkpoint, use_scratch_folders

        use_scratch_folders()
        args.model, args.second, args.pages = smoke_checkpoint(), None, ["home", "explain"]
        args.out = Path(os.environ.get("ENGINE_SMOKE_DIR", "/tmp")) / "screenshots"
    # a SIGTERM ends the run through the finally clauses below: the server and the browser are stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    port = _free_port()
    proc = start_dashboard(port, args.smoke)
    failed = []
    try:
        driver = new_driver()
        try:
            for stem, url in page_urls(f"http://127.0.0.1:{port}", args.model, args.second, args.pages):
                started = time.time()
                driver.set_window_size(WIDTH, 1600)
                driver.get(url)
                path = args.out / f"{stem}.png"
                try:
                    wait_settled(driver, args.timeout)
                    full_page_png(driver, path, args.timeout)
                except TimeoutError as err:  # saved as it stands, for a look at what it waits for
                    path.parent.mkdir(parents=True, exist_ok=True)
                    driver.save_screenshot(str(path))
                    failed.append(f"{stem}: {err}")
                if error_boxes(driver):
                    failed.append(f"{stem}: an exception box on the page")
                print(f"{stem}: {path} ({time.time() - started:.1f} s)", flush=True)
        finally:
            driver.quit()
    finally:
        stop_dashboard(proc)
    for line in failed:
        print(f"NOT RIGHT: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())
