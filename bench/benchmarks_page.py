"""Benchmarks-page speed in a real browser, against its budgets: the page opens in <= 2 s and switches a run
in <= 1 s. Reported as ratios to the budget (1.0 = on budget; lower is better), so machines compare.

Starts `streamlit run app/main.py` on a loopback port over the results store (the shipped one by default), opens the
home page once (the server's imports and the model load are not the Benchmarks page's), then:

- **open**: /benchmarks in a fresh browser session, `--runs` times, from the request to the end of the page's script
  run (Streamlit's script state reads 'notRunning' for half a second, not counted; as bench/dashboard.py --pages).
  The first open meets the page's caches cold (its run read for the first time); the rest are warm;
- **switch**: in one session, the Run selector set to the other of two runs, alternately, `--runs` times, from the
  choice to the end of the script run that shows it (the URL names the new run and the script has ended).

    python bench/benchmarks_page.py                          # tiny-rt-3seeds <-> minilm-rt-3seeds, 5 runs
    python bench/benchmarks_page.py --runs 9 --model tiny-rt-masked-s0
    python bench/benchmarks_page.py --smoke                  # CI: a toy checkpoint, two copied runs, one run each
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's engine and app, not an installed copy's

from _smoke import SMOKE_HELP, smoke_checkpoint, use_scratch_folders  # noqa: E402
from dashboard import load_browser_helpers, new_driver, open_timed, streamlit_server  # noqa: E402

OPEN_BUDGET_S = 2.0
SWITCH_BUDGET_S = 1.0
RUNS = ("tiny-rt-3seeds", "minilm-rt-3seeds")


def _script_ended(driver, settle: float = 0.5) -> bool:
    """Whether the app's script state has read 'notRunning' for `settle` seconds (polled here)."""
    from selenium.webdriver.common.by import By

    since = time.perf_counter()
    while time.perf_counter() - since < settle:
        apps = driver.find_elements(By.CSS_SELECTOR, "[data-testid='stApp']")
        if not apps or apps[0].get_attribute("data-test-script-state") != "notRunning":
            return False
        time.sleep(0.05)
    return True


def _switch_timed(driver, run: str, timeout: float = 120, settle: float = 0.5) -> float:
    """Seconds from choosing `run` in the Run selector to the end of the script run that shows it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = next(b for b in driver.find_elements(By.CSS_SELECTOR, "[data-testid='stSelectbox']")
               if b.text.startswith("Run"))
    field = box.find_element(By.TAG_NAME, "input")
    field.click()
    field.send_keys(run)
    time.sleep(0.3)  # the list filters as it is typed: not counted
    start = time.perf_counter()
    field.send_keys(Keys.ENTER)
    while True:
        shown = urllib.parse.parse_qs(urllib.parse.urlparse(driver.current_url).query).get("run", [None])[0]
        if shown == run:
            ended = time.perf_counter()
            if _script_ended(driver, settle):
                return ended - start
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"the page did not show run {run} in {timeout:g} s")
        time.sleep(0.05)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="checkpoint id chosen in the sidebar (default: the app's default)")
    p.add_argument("--runs", type=int, default=5, help="opens and switches to time (median reported)")
    p.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = p.parse_args()
    if args.smoke:
        root = use_scratch_folders()
        args.model, args.runs = smoke_checkpoint(), 1
        for run in RUNS:  # two shipped runs in the scratch results store
            if not (root / "results" / run).exists():
                shutil.copytree(ROOT / "results" / run, root / "results" / run)
    helpers = load_browser_helpers()
    if not (helpers.CHROMIUM and helpers.CHROMEDRIVER):
        print("needs Debian's chromium and chromium-driver")
        return 2
    from engine.runtime import code_version

    query = f"?model={urllib.parse.quote(args.model)}" if args.model else ""
    # the server imports this checkout's app and engine too
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    opens, switches, errors = [], [], 0
    with streamlit_server(helpers.free_port(), "app/main.py", ROOT, env, tries=480) as url:
        driver = new_driver(helpers.CHROMIUM, helpers.CHROMEDRIVER)
        try:
            open_timed(driver, f"{url}/{query}")  # the server's first page: imports and the model load, not counted
        finally:
            driver.quit()
        for _ in range(args.runs):
            driver = new_driver(helpers.CHROMIUM, helpers.CHROMEDRIVER)
            try:
                seconds, boxes = open_timed(driver, f"{url}/benchmarks{query}")
            finally:
                driver.quit()
            opens.append(seconds)
            errors += boxes
        driver = new_driver(helpers.CHROMIUM, helpers.CHROMEDRIVER)
        try:
            open_timed(driver, f"{url}/benchmarks?run={RUNS[0]}")
            for i in range(args.runs):
                switches.append(_switch_timed(driver, RUNS[(i + 1) % 2]))
        finally:
            driver.quit()
    print(f"# bench/benchmarks_page.py · code {code_version()} · {platform.machine()} · {os.cpu_count()} CPUs · "
          f"load average {os.getloadavg()[0]:.2f} at the end · runs {RUNS[0]} <-> {RUNS[1]}")
    print("| what | first (s) | median (s) | range (s) | budget (s) | median / budget | within |")
    print("|---|---|---|---|---|---|---|")
    for what, times, budget in (("open Benchmarks, fresh session", opens, OPEN_BUDGET_S),
                                ("switch the run", switches, SWITCH_BUDGET_S)):
        median = statistics.median(times)
        print(f"| {what} | {times[0]:.2f} | {median:.2f} | {min(times):.2f}-{max(times):.2f} | <= {budget:g} | "
              f"{median / budget:.2f} | {'yes' if median <= budget else '**no**'} |")
    print(f"exception boxes on the page: {errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
