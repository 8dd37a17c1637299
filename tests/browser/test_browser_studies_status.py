"""The Studies page's status line reads whole in a browser (it cut "0 of 4 needed" to
"0 of 4 ne..."): no metric value on the page is clipped by its column. Only a browser lays the text out, so this is
a headless Debian chromium test (selenium, as tests/browser/test_browser_study.py), on localhost, where the one user is the
admin."""
from __future__ import annotations

import time

from browser_helpers import LAPTOP_WINDOW, NEEDS_CHROMIUM, chromium, page_text, serve_app, wait_for, wait_for_text

pytestmark = NEEDS_CHROMIUM

# Every element under a metric's value whose text runs past its box (Streamlit cuts it with an ellipsis).
CLIPPED = """
return Array.from(document.querySelectorAll("[data-testid='stMetricValue'], [data-testid='stMetricValue'] *"))
  .filter(e => e.scrollWidth > e.clientWidth + 1)
  .map(e => e.closest("[data-testid='stMetric']").innerText.replace(/\\n/g, ' | '));
"""


def test_the_studies_status_metrics_are_not_clipped(tmp_path):
    from engine.annotation.studies import StudyConfig, StudyStore
    from engine.plausibility.tasks import make_task

    cache, results = tmp_path / "cache", tmp_path / "results"
    cache.mkdir()
    results.mkdir()
    store = StudyStore(results / "annotations.sqlite3")
    tokens = ["a", "gorgeous", ",", "witty", "film"]
    tasks = [make_task("m", f"a gorgeous, witty film {k}", tokens, {"x": [0.1, 0.9, 0.0, 0.5, 0.2],
                                                                     "y": [0.4, -0.3, 0.0, 0.1, 0.6]}) for k in range(4)]
    store.create(StudyConfig(name="Clipping study", model_id="m", measures=("x", "y"), n_examples=4,
                             tasks_per_annotator=2, overlap=2, attention_checks=0), tasks, code_version="test")
    with serve_app(cache, results) as url:
        driver = chromium(LAPTOP_WINDOW)  # 1200 px wide, as a laptop's browser window
        try:
            driver.get(f"{url}/studies")
            wait_for(driver, "h1", text="Studies")
            wait_for_text(driver, "Tasks complete", timeout=120)
            time.sleep(2.0)  # the metrics' fonts and columns settle
            metrics = driver.find_elements("css selector", "[data-testid='stMetric']")
            assert len(metrics) >= 5, page_text(driver)[-800:]
            annotators = next(m.text for m in metrics if m.text.startswith("Annotators"))
            assert "0 of 4" in annotators, annotators
            clipped = driver.execute_script(CLIPPED)
            assert not clipped, clipped
        finally:
            driver.quit()
