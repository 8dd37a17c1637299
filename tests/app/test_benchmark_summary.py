"""The Benchmarks page in parts (app/benchmark_summary.py, pages/benchmarks.py), driven by Streamlit's AppTest: it opens
on the summary of one run (the ranking with FMM's published numbers of the same task beside ours, each measure one
link from Explain on an example), reads only that run to open, computes a part only when it is chosen, and takes its
run and part from the URL."""
from __future__ import annotations

import json
import shutil
import urllib.parse
from pathlib import Path

import pandas as pd
import pytest
from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
BENCHMARKS = str(ROOT / "pages" / "benchmarks.py")
SHIPPED = "tiny-rt-masked-s0"  # a model of the shipped run results/tiny-rt-3seeds
pytestmark = pytest.mark.usefixtures("one_thread")


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=300)


def test_the_summarys_constants_are_the_reports():
    """The page keeps its own copy of the README summary's runs and FMM's task mapping (the report module costs over
    a second to import): they must be the report's."""
    from app import benchmark_summary as summary
    from engine.reports import masking_tables

    assert list(summary.HEADLINE_RUNS) == [run for _, _, run, _ in masking_tables.RACU_RUNS]
    assert summary.SAME_TASK_FMM == masking_tables.SAME_TASK_FMM and summary.OTHER_TASK_FMM == masking_tables.OTHER_TASK_FMM


@pytest.mark.parametrize("model_id", [None, "minilm-rt-masked-s1", "tiny-babi-1-masked-s0", "smollm2-rt-prompt",
                                      "a-model-with-no-cells"])
def test_the_opening_run_found_from_file_names_is_the_one_found_from_the_rows(model_id):
    """opening_run_of (cell file names, no reading) opens on the run opening_run (every row of the store) opens on."""
    from app.benchmark_summary import opening_run_of
    from app.benchmark_views import opening_run
    from engine.results import ResultsStore

    store = ResultsStore(ROOT / "results")
    assert opening_run_of(store, model_id) == opening_run(store.load(), model_id)


def test_fmms_published_numbers_stand_beside_ours_for_the_same_task_only():
    """rt is compared with FMM's SST2 row (the same task): each measure gets FMM's own number and interval; a measure
    FMM did not publish gets none; bAbI-1 is labelled another task; ROAR gets no FMM column (FMM did not retrain)."""
    from app.benchmark_summary import PUBLISHED, with_published
    from engine.results.published import load_published

    ours = pd.DataFrame({"measure": ["loo-sign", "ig-sign", "random", "attention-rollout"],
                         "racu_pct": [290.0, 280.0, 0.0, 10.0]})
    table, label = with_published(ours, "rt", "recursive masking")
    fmm, _ = load_published("fmm_table1")
    sst2 = fmm[fmm["dataset"] == "SST2"].set_index("importance_measure")
    assert label == "FMM SST2 RACU % (published)"
    got = table.set_index("measure")
    for measure in ("loo-sign", "ig-sign"):
        assert got.loc[measure, PUBLISHED] == sst2.loc[measure, "racu_pct"]
        assert got.loc[measure, "published_racu_low"] == pytest.approx(sst2.loc[measure, "racu_pct"]
                                                                       - sst2.loc[measure, "racu_minus"])
        assert got.loc[measure, "published_racu_high"] == pytest.approx(sst2.loc[measure, "racu_pct"]
                                                                        + sst2.loc[measure, "racu_plus"])
    assert pd.isna(got.loc["attention-rollout", PUBLISHED]) and pd.isna(got.loc["random", PUBLISHED])
    assert with_published(ours, "babi-1", "recursive masking")[1] == "FMM bAbI-2 RACU % (published, another task)"
    assert with_published(ours, "rt", "roar") == (ours, None)
    assert with_published(ours, "toy", "recursive masking")[1] is None


def test_a_measure_fmm_did_not_publish_reads_not_published_in_the_shown_ranking_not_none():
    """The shown ranking writes "not published" (its interval an em dash) where FMM has no number, never a blank the
    grid draws as "None"; a published number keeps one decimal; the CSV's frame keeps the numbers (NaN)."""
    from app.benchmark_summary import NOT_PUBLISHED, PUBLISHED, published_as_text, with_published

    ours = pd.DataFrame({"measure": ["loo-sign", "attention-rollout"], "racu_pct": [290.0, 10.0]})
    table, _ = with_published(ours, "rt", "recursive masking")
    shown = published_as_text(table).set_index("measure")
    assert shown.loc["attention-rollout", PUBLISHED] == NOT_PUBLISHED
    assert shown.loc["attention-rollout", "published_racu_low"] == "\u2014" == shown.loc["attention-rollout",
                                                                                          "published_racu_high"]
    assert shown.loc["loo-sign", PUBLISHED] == f"{table.set_index('measure').loc['loo-sign', PUBLISHED]:.1f}"
    assert not shown.isna().any().any() and pd.isna(table.set_index("measure").loc["attention-rollout", PUBLISHED])


@pytest.fixture()
def shipped_model(models_cache, toy_classifier, tmp_path, monkeypatch):
    """The toy classifier under the shipped run's model id with dataset rt, over a results store holding copies of
    three shipped runs and the shipped budget run."""
    from engine.models import save_classifier

    folder = Path(save_classifier(toy_classifier, SHIPPED) or models_cache / SHIPPED)
    meta = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    (folder / "metadata.json").write_text(json.dumps({**meta, "dataset": "rt"}), encoding="utf-8")
    results = tmp_path / "results"
    for run in ("tiny-rt-3seeds", "minilm-rt-3seeds", "bilstm-rt-roar", "tiny-rt-budget"):
        shutil.copytree(ROOT / "results" / run, results / run)
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(results))
    return results


def test_the_page_opens_on_the_summary_reading_only_its_run_and_computes_a_part_when_chosen(shipped_model,
                                                                                          monkeypatch):
    """Opening reads the cells of the shown run alone; the summary ranks its measures with FMM's SST2 numbers beside
    them and links each ranked measure to Explain (the run's own model, the first rt test input, that measure); the
    curves are the part drawn first, and the budget part is not computed until it is chosen."""
    from engine.results import ResultsStore

    reads: list[str] = []
    read_cell = ResultsStore._read_cell_columns
    monkeypatch.setattr(ResultsStore, "_read_cell_columns",
                        staticmethod(lambda path: reads.append(Path(path).parent.parent.name) or read_cell(path)))
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    from engine.results import store as store_module

    store_module._LOADED.clear()  # the home page read the run already (ResultsStore.load's per-process memo)
    reads.clear()
    at.switch_page(BENCHMARKS)
    _run(at)
    assert at.selectbox(key="bench_run").value == "tiny-rt-3seeds"
    cells = len(list((shipped_model / "tiny-rt-3seeds" / "cells").glob("*.parquet")))
    assert sorted(set(reads)) == ["tiny-rt-3seeds"] and len(reads) == cells, "only the shown run is read, once"

    ranking = at.dataframe[0].value
    assert ranking["racu_pct"].is_monotonic_decreasing and ranking["measure"].iloc[-1] == "random"
    assert ranking.set_index("measure").loc["loo-sign", "published_racu_pct"] == "171.3"  # FMM SST2, Table 1
    config = json.loads(at.dataframe[0].proto.columns)
    assert config["published_racu_pct"]["label"] == "FMM SST2 RACU % (published)"
    links = [p for p in at.page_link if p.proto.query_string]
    views = [{k: v[0] for k, v in urllib.parse.parse_qs(p.proto.query_string).items()} for p in links]
    assert [v["measures"] for v in views] == [m for m in ranking["measure"] if m != "random"]
    from engine.data import get_dataset

    first = get_dataset("rt", 0).split("test")[0].primary
    assert all(v["model"] == SHIPPED and v["text"] == first for v in views)
    assert all(p.proto.page == "explain" for p in links), [p.proto.page for p in links]

    assert any(h.value.endswith("curves") for h in at.subheader), "the curves are the part drawn first"
    assert not any("Faithfulness against forward passes" in h.value for h in at.subheader)
    at.segmented_control(key="bench_part").set_value("budget")
    _run(at)
    assert any("Faithfulness against forward passes" in h.value for h in at.subheader)
    assert not any(h.value.endswith("curves") for h in at.subheader), "one part at a time"
    shown = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert shown == {"run": "tiny-rt-3seeds", "part": "budget"}, "the view is in the URL"


def test_a_linked_view_opens_on_its_run_and_part(shipped_model):
    """`/benchmarks?run=minilm-rt-3seeds&part=masf` (how Explain links a measure's standing) opens on that run and
    part, and a later choice of run is not undone by the URL the page wrote itself."""
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    at.query_params.update({"run": "minilm-rt-3seeds", "part": "masf"})
    at.switch_page(BENCHMARKS)
    _run(at)
    assert at.selectbox(key="bench_run").value == "minilm-rt-3seeds"
    assert at.segmented_control(key="bench_part").value == "masf"
    assert any("MaSF" in h.value for h in at.subheader)
    at.selectbox(key="bench_run").set_value("tiny-rt-3seeds")
    _run(at)
    _run(at)
    assert at.selectbox(key="bench_run").value == "tiny-rt-3seeds"
    assert at.dataframe[0].value.set_index("measure").loc["loo-sign", "published_racu_pct"] == "171.3"


def test_opening_the_page_does_not_load_the_sidebars_model(shipped_model, monkeypatch):
    """The model (a second or more to load) is loaded by the part that needs it, not to open the page: the summary and
    the curves are drawn from the store; the "own explanations" part loads it; the masked-fine-tuning note still comes
    from the catalogue's entry."""
    import app.shared

    loads: list[str] = []
    real = app.shared.load_classifier
    monkeypatch.setattr(app.shared, "load_classifier", lambda model_id: loads.append(model_id) or real(model_id))
    app.shared.get_classifier.clear()
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    at.switch_page(BENCHMARKS)
    _run(at)
    assert at.sidebar.selectbox[0].value == SHIPPED and loads == [], loads
    assert any("Compute cells" in e.label for e in at.expander), "the form is offered (it loads the model when opened)"
    at.segmented_control(key="bench_part").set_value("own")
    _run(at)
    assert loads == [SHIPPED]
