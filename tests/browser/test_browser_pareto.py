"""The Benchmarks page's Pareto view in a real headless Chromium: the shipped budget run is drawn, with the legend
naming every method and the Pareto front (a screenshot, docs/benchmarks-pareto.png, only with
ENGINE_UPDATE_SCREENSHOTS=1)."""
from __future__ import annotations

import shutil
import time

from browser_helpers import NEEDS_CHROMIUM, ROOT, SHOTS, TALL_WINDOW, chromium, serve_app, wait_for

RUN = "tiny-rt-budget"
pytestmark = NEEDS_CHROMIUM


def test_pareto_view_draws_every_method_and_the_front(tmp_path):
    """The shipped budget run (a missing one fails: it skipped before) is drawn with every method and the front."""
    from selenium.webdriver.common.by import By

    assert (ROOT / "results" / RUN / "points.csv").is_file(), f"the shipped budget run results/{RUN} is missing"

    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / RUN, results / RUN)
    (tmp_path / "cache").mkdir()
    with serve_app(tmp_path / "cache", results) as url:
        driver = chromium(TALL_WINDOW, downloads=tmp_path)
        try:
            driver.get(f"{url}/benchmarks?part=budget")  # the page's budget part, linked
            heading = wait_for(driver, "[data-testid='stMain']", text="Faithfulness against forward passes")
            assert heading
            deadline = time.time() + 60
            while True:  # plotly draws the legend once the chart is laid out
                legend = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .legendtext")]
                if {"anytime", "Pareto front", "beam-20", "loo"} <= set(legend):
                    break
                assert time.time() < deadline, f"legend {legend}"
                time.sleep(0.5)
            plot = driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")[0]
            markers = plot.find_elements(By.CSS_SELECTOR, ".scatterlayer .point")
            assert len(markers) >= 10, "a point per method and budget"
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", plot)
            time.sleep(1)
            SHOTS.mkdir(exist_ok=True)
            driver.save_screenshot(str(SHOTS / "benchmarks-pareto.png"))
        finally:
            driver.quit()
