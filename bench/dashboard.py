"""Explain-page speed in a real browser (target: a heatmap under a second), as a ratio to the engine.

Starts `streamlit run app/main.py` on a loopback port with a checkpoint from models_cache (default
tiny-rt-masked-s0), drives Debian's headless Chromium to explain a review of 64 tokens with the page's
default measures, and reports the median click-to-render time of warm runs (after the first, which
loads the model) next to the engine's own time for the same work (`explain_text`), so the share spent
in Streamlit's round trip and rendering is visible.

    python bench/dashboard.py                       # tiny-rt-masked-s0, 7 warm runs
    python bench/dashboard.py --model minilm-rt-masked-s0 --runs 5
    python bench/dashboard.py --smoke               # CI: a toy checkpoint, one warm run
    python bench/dashboard.py --pages --runs 3      # every page: open time in a fresh browser session
    python bench/dashboard.py --script-cpu --runs 3 # every page's script run alone: CPU seconds, no browser

--pages: the page table of the speed budgets (docs/performance.md). The first page after the server starts (/,
the home page) is timed once; then each page of the navigation is opened by its URL in a fresh browser session
`--runs` times, timed from the request to the end of its script run (Streamlit's script state reads 'notRunning'
and stays so for half a second; the half second is not counted), and checked for an exception box. Budgets: the
first page <= 6 s, every other page <= 2 s. Last, the floor: an almost empty Streamlit page on a server of its own,
opened the same way (what a fresh session costs before any page's work).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from _smoke import SMOKE_HELP, smoke_checkpoint, use_scratch_folders  # noqa: E402

# 64 tokens for the tiny/minilm (BERT uncased) tokenizer with [CLS] and [SEP]; checked at run time
REVIEWS = [
    "a gripping , funny and often moving portrait of a family that never quite manages to say what it means , "
    "and the director lets the silences do the work ; the performances are strong , the photography is lovely , "
    "and if the last act drags the whole thing still lands , and i would gladly watch it again",
]


def _variant(i: int) -> str:
    """A different review of the same length per run, so nothing is served from a cache."""
    words = REVIEWS[0].split()
    return " ".join(words[i % len(words):] + words[: i % len(words)])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny-rt-masked-s0", help="checkpoint id in models_cache")
    p.add_argument("--runs", type=int, default=7, help="warm runs to time (median reported)")
    p.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    p.add_argument("--pages", action="store_true", help="time every page's opening against its budget instead")
    p.add_argument("--script-cpu", action="store_true",
                   help="instead: each page's script run in this process (Streamlit's AppTest, no browser), the CPU "
                        "seconds of the script's thread, first run (imports, reads) and warm runs")
    args = p.parse_args()
    if args.smoke:
        use_scratch_folders()
        args.model, args.runs = smoke_checkpoint(), 1
    if args.script_cpu:
        return bench_script_cpu(args.model, args.runs)
    if args.pages:
        return bench_pages(args.model, args.runs)

    helpers = load_browser_helpers()
    CHROMEDRIVER, CHROMIUM = helpers.CHROMEDRIVER, helpers.CHROMIUM

    from engine.explain import LIVE_MEASURES, explain_text
    from engine.models import load_classifier, tokenize
    from engine.runtime import code_version, configure

    if not (CHROMIUM and CHROMEDRIVER):
        print("needs Debian's chromium and chromium-driver")
        return 2
    configure()
    classifier = load_classifier(args.model)
    n_tokens = tokenize(classifier.tokenizer, REVIEWS[0], max_length=512).input_ids.shape[1]
    engine_times = []
    for i in range(args.runs + 1):
        t = time.perf_counter()
        explain_text(classifier, _variant(i), measures=list(LIVE_MEASURES))
        engine_times.append(time.perf_counter() - t)
    engine_ms = statistics.median(engine_times[1:]) * 1e3

    env = dict(os.environ, ENGINE_RESULTS_DIR=tempfile.mkdtemp())
    with streamlit_server(helpers.free_port(), "app/main.py", ROOT, env, tries=180, pause=0.5) as url:
        driver = new_driver(CHROMIUM, CHROMEDRIVER)
        try:
            driver.get(f"{url}/explain")  # the app opens on the home page
            helpers.wait_for(driver, "h1", text="Explain a prediction")
            helpers.choose_option(driver, "Checkpoint", args.model)  # the sidebar's model box; returns once it shows it
            # The render is recognised by the text's last word; the smoke checkpoint (toy data) keeps only 16 tokens, so
            # there the first word stands in (the timing then means nothing, which smoke numbers never do).
            word = 0 if args.smoke else -1
            first = helpers.explain_in_page(driver, _variant(100), _variant(100).split()[word])
            times = []
            for i in range(args.runs):
                text = _variant(i + 1)
                times.append(helpers.explain_in_page(driver, text, text.split()[word]))
        finally:
            driver.quit()
    browser_ms = statistics.median(times) * 1e3
    print(f"# bench/dashboard.py · code {code_version()} · {platform.machine()} · {os.cpu_count()} CPUs · "
          f"load average {os.getloadavg()[0]:.2f} at the end")
    print("| model | input | measures | first explain (loads the model) | warm explain, browser (median of "
          f"{args.runs}) | engine alone (explain_text) | browser / engine |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.model} | {n_tokens} tokens | {', '.join(LIVE_MEASURES)} | {first:.2f} s | {browser_ms:.0f} ms "
          f"(min {min(times) * 1e3:.0f}, max {max(times) * 1e3:.0f}) | {engine_ms:.0f} ms | {browser_ms / engine_ms:.1f}x |")
    return 0


FIRST_PAGE_BUDGET_S = 6.0
PAGE_BUDGET_S = 2.0


@contextlib.contextmanager
def streamlit_server(port: int, script: str, cwd: Path, env: dict[str, str] | None = None, *, tries: int = 240,
                     pause: float = 0.25):
    """`streamlit run script` on 127.0.0.1:port (headless, no usage statistics even where the checkout's
    .streamlit/config.toml does not apply, output discarded), waited for until its health check says ok (at most
    `tries` checks, `pause` s apart after a refused one); yields its URL and stops the server after. Raises
    RuntimeError when it never answers."""
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true",
                             "--browser.gatherUsageStats", "false"],
                            cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(tries):
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(pause)
        else:
            raise RuntimeError(f"streamlit run {script} did not answer on {url} after {tries} health checks")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def load_browser_helpers():
    """tests/browser_helpers.py, loaded by path (tests/ is not a package): Chromium's paths, a free port, the waits
    and the Explain page's timed run that the browser tests use too."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("browser_helpers", ROOT / "tests" / "browser_helpers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def new_driver(chromium: str, chromedriver: str):
    """A headless Chromium (`chromium`, driven through `chromedriver`) with a 1400x1800 window; the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1800"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(chromedriver), options=options)


def open_timed(driver, url: str, timeout: float = 300, settle: float = 0.5) -> tuple[float, int]:
    """(seconds from the request until the page's script run ended, exception boxes on the page). The end is the
    first moment the app's script state reads 'notRunning' and stays so for `settle` seconds (a page may rerun
    itself once right after its first run); `settle` is not counted."""
    from selenium.webdriver.common.by import By

    start = time.perf_counter()
    driver.get(url)
    since = None
    while True:
        now = time.perf_counter()
        apps = driver.find_elements(By.CSS_SELECTOR, "[data-testid='stApp']")
        state = apps[0].get_attribute("data-test-script-state") if apps else None
        # the first paint reads notRunning before the script starts: wait for the main block to have content
        drawn = bool(driver.find_elements(By.CSS_SELECTOR, "[data-testid='stMain'] h1"))
        if state == "notRunning" and drawn:
            since = since or now
            if now - since >= settle:
                return since - start, len(driver.find_elements(By.CSS_SELECTOR, "[data-testid='stException']"))
        else:
            since = None
        if now - start > timeout:
            raise TimeoutError(f"{url}: the script did not end in {timeout:g} s")
        time.sleep(0.05)


def bench_pages(model_id: str, runs: int) -> int:
    """The page table: the first page after a server start, then every page of the admin's navigation opened in
    a fresh browser session `runs` times (median), against the budgets."""
    from app.availability import PAGES
    from engine.runtime import code_version

    helpers = load_browser_helpers()
    if not (helpers.CHROMIUM and helpers.CHROMEDRIVER):
        print("needs Debian's chromium and chromium-driver")
        return 2
    rows = []
    with streamlit_server(helpers.free_port(), "app/main.py", ROOT, dict(os.environ)) as url:
        pages = [(p.title, p.url_path or p.file.removesuffix(".py")) for p in PAGES
                 if p.file and "admin" in p.roles]
        driver = new_driver(helpers.CHROMIUM, helpers.CHROMEDRIVER)
        try:
            first, errors = open_timed(driver, f"{url}/?model={model_id}")
        finally:
            driver.quit()
        rows.append(("first page after the server starts (Home)", [first], errors, FIRST_PAGE_BUDGET_S))
        for title, path in pages:
            times, errors = [], 0
            for _ in range(runs):
                driver = new_driver(helpers.CHROMIUM, helpers.CHROMEDRIVER)
                try:
                    target = f"{url}/?model={model_id}" if path == "home" else f"{url}/{path}?model={model_id}"
                    seconds, boxes = open_timed(driver, target)
                finally:
                    driver.quit()
                times.append(seconds)
                errors += boxes
            rows.append((title, times, errors, PAGE_BUDGET_S))
            print(f"  {title}: {', '.join(f'{t:.2f}' for t in times)} s", flush=True)
    floor = _floor_times(helpers, runs)
    rows.append(("*floor: an almost empty page (a title, a line) of its own server, fresh session*", floor, 0, None))
    print(f"  floor: {', '.join(f'{t:.2f}' for t in floor)} s", flush=True)
    print(f"# bench/dashboard.py --pages · code {code_version()} · model {model_id} · {platform.machine()} · "
          f"{os.cpu_count()} CPUs · load average {os.getloadavg()[0]:.2f} at the end")
    print(f"| page | open, fresh session (median of {runs}; s) | range (s) | budget (s) | within | exception boxes |")
    print("|---|---|---|---|---|---|")
    for title, times, errors, budget in rows:
        median = statistics.median(times)
        within = "" if budget is None else ("yes" if median <= budget else "**no**")
        print(f"| {title} | {median:.2f} | {min(times):.2f}-{max(times):.2f} | {'' if budget is None else f'<= {budget:g}'} | "
              f"{within} | {errors} |")
    return 0


HEAVY = ("torch", "transformers", "tokenizers", "scipy", "sklearn", "matplotlib", "plotly", "pandas", "pyarrow")


def bench_script_cpu(model_id: str, runs: int) -> int:
    """The server's share of a page's opening, without the browser: each page of the admin's navigation run as a fresh
    session (AppTest) in this one process, in the navigation's order (so a page's first run pays the imports and reads
    no page before it paid, as on a server), then `runs` more fresh sessions (warm: the caches filled). Each script
    run is timed on its own thread's CPU clock (other processes do not inflate it) and on the wall clock."""
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.testing.v1 import AppTest

    from app.availability import PAGES

    spent: list[tuple[float, float]] = []
    run_script = script_runner.exec_func_with_error_handling

    def timed(func, ctx):
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return run_script(func, ctx)
        finally:
            spent.append((time.perf_counter() - wall, time.thread_time() - cpu))

    script_runner.exec_func_with_error_handling = timed

    def one(page) -> tuple[float, float, int]:
        at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=600)
        at.query_params["model"] = model_id
        if page.key != "home":
            at.switch_page(str(ROOT / "pages" / page.file))
        before = len(spent)
        at.run()
        mine = spent[before:]
        return sum(w for w, _ in mine), sum(c for _, c in mine), len(at.exception)

    # the code version (engine.runtime) is read after the pages ran: importing it first could import for them what they
    # import themselves
    print(f"# bench/dashboard.py --script-cpu · model {model_id} · {os.cpu_count()} CPUs · load average "
          f"{os.getloadavg()[0]:.2f} at the start")
    print(f"| page | first run: CPU s (wall s) | imported by it | warm, median of {runs}: CPU s (wall s) | "
          "exception boxes |")
    print("|---|---|---|---|---|")
    for page in PAGES:
        if not page.file or "admin" not in page.roles:
            continue
        loaded = set(sys.modules)
        wall, cpu, errors = one(page)
        new = sorted({m.split(".")[0] for m in set(sys.modules) - loaded} & set(HEAVY))
        warm = [one(page) for _ in range(runs)]
        print(f"| {page.title} | {cpu:.2f} ({wall:.2f}) | {', '.join(new) or '-'} | "
              f"{statistics.median(c for _, c, _ in warm):.2f} ({statistics.median(w for w, _, _ in warm):.2f}) | "
              f"{errors + sum(e for _, _, e in warm)} |", flush=True)
    from engine.runtime import code_version

    print(f"# code {code_version()} · load average {os.getloadavg()[0]:.2f} at the end")
    return 0


FLOOR_APP = 'import streamlit as st\nst.title("Floor")\nst.write("An almost empty page.")\n'


def _floor_times(helpers, runs: int) -> list[float]:
    """The fixed cost of a fresh browser session, timed as the pages are: an almost empty Streamlit app on a server of
    its own (the frontend's load, the websocket, the session, one trivial script run)."""
    folder = Path(tempfile.mkdtemp())
    (folder / "floor.py").write_text(FLOOR_APP, encoding="utf-8")
    times = []
    with streamlit_server(helpers.free_port(), str(folder / "floor.py"), folder) as url:
        for _ in range(runs):
            driver = new_driver(helpers.CHROMIUM, helpers.CHROMEDRIVER)
            try:
                times.append(open_timed(driver, url)[0])
            finally:
                driver.quit()
    return times


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())
