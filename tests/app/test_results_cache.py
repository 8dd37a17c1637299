"""The Benchmarks page reads the results store once per state of the store (app/results_cache.py): a rerun after a
widget change reads no cell again, and a cell written between two reruns is read and shown on the next."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")


def _curve(measure: str, seed: int, drop: float) -> pd.DataFrame:
    """One recursive-masking cell's rows: accuracy falling by `drop` over 11 levels."""
    return pd.DataFrame([{"model": f"tiny-rt-masked-s{seed}", "seed": seed, "dataset": "rt", "measure": measure,
                          "strategy": "masked", "step": i, "ratio": i / 10, "metric": "accuracy",
                          "value": 0.8 - drop * i / 10, "p_value": 0.4, "p_below_005": 0.05, "mean_probability": 0.7,
                          "base_model": "tiny", "seconds_per_explanation": 0.01} for i in range(11)])


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=120)


def test_a_rerun_reads_no_cell_of_an_unchanged_store_and_a_new_cell_on_the_next(models_cache, tmp_path, monkeypatch):
    from engine.results import ResultsStore

    reads: list[str] = []
    read_cell = ResultsStore._read_cell_columns
    monkeypatch.setattr(ResultsStore, "_read_cell_columns",
                        staticmethod(lambda path: reads.append(Path(path).name) or read_cell(path)))
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    store = ResultsStore(tmp_path / "results")
    for seed in range(2):
        for measure, drop in (("random", 0.2), ("loo-sign", 0.4)):
            store.write_cell("demo", {"m": measure, "s": seed}, _curve(measure, seed, drop + 0.01 * seed), {})
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    at.switch_page(str(ROOT / "pages" / "benchmarks.py"))
    _run(at)
    assert len(reads) == 4, f"the first run reads each of the 4 cells once: {reads}"

    reads.clear()
    at.multiselect(key="bench_measures").set_value(["random"])
    _run(at)
    assert list(at.dataframe[0].value["measure"]) == ["random"], "the rerun happened"
    assert reads == [], "a widget change reads no cell again"

    store.write_cell("second", {"m": "random", "s": 0}, _curve("random", 0, 0.2), {})
    _run(at)
    assert "second" in at.selectbox(key="bench_run").options
    assert reads == [], f"a new run is listed, not read, until it is shown: {reads}"
    at.selectbox(key="bench_run").set_value("second")
    _run(at)
    assert len(reads) == 1, f"the run shown is read, once: {reads}"

    reads.clear()
    store.write_cell("second", {"m": "loo-sign", "s": 0}, _curve("loo-sign", 0, 0.4), {})
    _run(at)
    assert len(reads) == 2, f"a written cell changes its run's state: the run is read again, once: {reads}"
    assert set(at.dataframe[0].value["measure"]) == {"random", "loo-sign"}


def test_a_files_stamp_changes_when_it_is_replaced_even_with_the_same_size_and_time(tmp_path):
    import os

    from app.results_cache import file_stamp

    path = tmp_path / "points.csv"
    assert file_stamp(path) is None
    path.write_text("a,b\n1,2\n")
    before = file_stamp(path)
    stat = path.stat()
    new = tmp_path / "new.csv"
    new.write_text("a,b\n3,4\n")
    os.utime(new, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    new.replace(path)  # how the project writes a file: a new one renamed in (engine.atomic)
    assert file_stamp(path) != before
