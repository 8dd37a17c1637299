"""The Benchmarks page's Pareto view and upload section, driven by Streamlit's AppTest (no browser): a budget run in
the results store is drawn with one trace per method and the Pareto front, and tabulated."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
RUN = "tiny-rt-budget"


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=120)


def test_benchmarks_page_draws_the_shipped_budget_run_with_its_pareto_front(models_cache, tmp_path, monkeypatch):
    """The shipped budget run (which must be there: a missing one fails, it skipped before) is drawn with a trace per
    method and the Pareto front, on a log x axis, and tabulated."""
    assert (ROOT / "results" / RUN / "points.csv").is_file(), f"the shipped budget run results/{RUN} is missing"
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / RUN, results / RUN)
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(results))
    at = AppTest.from_file(MAIN, default_timeout=120)
    _run(at)
    at.switch_page(str(ROOT / "pages" / "benchmarks.py"))
    _run(at)
    assert not any(s.key == "pareto_run" for s in at.selectbox), "the budget part is computed only when chosen"
    at.segmented_control(key="bench_part").set_value("budget")
    _run(at)
    assert at.selectbox(key="pareto_run").value == RUN
    charts = at.get("plotly_chart")
    figure = json.loads(charts[0].proto.spec)
    names = [t.get("name") for t in figure["data"]]
    assert {"loo", "greedy-loo", "beam-2", "beam-5", "beam-10", "beam-20", "anytime", "Pareto front"} <= set(names)
    assert figure["layout"]["xaxis"]["type"] == "log"
    table = next(d.value for d in at.dataframe if "passes per input" in d.value.columns)  # after the published ones
    assert {"RACU %", "NAOPC", "passes per input", "Pareto (RACU)"} <= set(table.columns)
    assert any("at or above beam's curve" in c.value for c in at.caption)
    at.radio(key="pareto_metric").set_value("naopc")
    _run(at)
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert figure["layout"]["yaxis"]["title"]["text"].startswith("NAOPC")
    at.segmented_control(key="bench_part").set_value("own")
    _run(at)
    assert any("Evaluate your own explanations" in h.value for h in at.subheader)
