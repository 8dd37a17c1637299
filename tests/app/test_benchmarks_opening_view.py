"""What a newcomer meets first on the Benchmarks page: it opens on the headline results (the
README summary's first run, or the sidebar model's own), not on the BiLSTM ROAR run that sorts first; every table
shows readable column names from one mapping (app/column_labels.py), never the stores' `faith_low`, `plaus_n`; and
the charts' labels do not overlap (measure names beside points, the method comparison's legend)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
BENCHMARKS = str(ROOT / "pages" / "benchmarks.py")

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def shipped():
    from engine.results import ResultsStore

    return ResultsStore(ROOT / "results").load()


def test_the_page_opens_on_the_headline_run_or_the_models_own(shipped):
    from app.benchmark_views import opening_run
    from engine.reports.masking_tables import RACU_RUNS

    assert sorted(shipped["run"].unique())[0] == "bilstm-rt-roar", "the check would pass without the fix"
    assert opening_run(shipped) == RACU_RUNS[0][2] == "tiny-rt-3seeds"
    assert opening_run(shipped, "minilm-rt-masked-s1") == "minilm-rt-3seeds"
    assert opening_run(shipped, "tiny-babi-1-masked-s0") == "tiny-babi1-3seeds", "the headline run before a beam subset"
    assert opening_run(shipped, "smollm2-rt-prompt") == "smollm2-rt-zero-shot-masking"
    assert opening_run(shipped, "a-model-with-no-cells") == "tiny-rt-3seeds"


def _headers(frame) -> list[str]:
    """The column headers a reader sees: the column_config label where one is given, else the column's name."""
    config = json.loads(frame.proto.columns or "{}")
    return [config.get(str(c), {}).get("label") or str(c) for c in frame.value.columns]


def test_the_page_opens_on_the_headline_results_and_every_table_has_readable_headers(models_cache):
    """The shipped store, as a newcomer opens it: the headline run, and no header is a store's column name."""
    from app.column_labels import RAW_NAME

    at = AppTest.from_file(MAIN, default_timeout=600)
    at.run(timeout=600)
    at.switch_page(BENCHMARKS)
    at.run(timeout=600)
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="bench_run").value == "tiny-rt-3seeds"
    frames, charts = list(at.dataframe), []
    for part in ("masf", "plausibility", "budget", "evaluation"):  # the parts with tables and the MaSF chart
        at.segmented_control(key="bench_part").set_value(part)
        at.run(timeout=600)
        assert not at.exception, (part, [e.message for e in at.exception])
        frames += list(at.dataframe)
        charts += [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(frames) >= 4, "area, faithfulness against plausibility, budget, published tables at least"
    raw = {h for f in frames for h in _headers(f) if re.match(RAW_NAME, h)}
    assert not raw, raw
    # the MaSF share chart names its 5% line in the legend: a label on the line sat on the curves running along it
    (masf,) = [c for c in charts if "p < 0.05" in str(c["layout"].get("yaxis", {}).get("title", ""))]
    assert not masf["layout"].get("annotations"), masf["layout"].get("annotations")
    assert "5% expected under the null" in [t.get("name") for t in masf["data"]]


def _label_boxes(fig, height: int) -> list[tuple[str, tuple]]:
    from app.point_labels import label_box, pixels

    xs = [float(t.x[0]) for t in fig.data]
    ys = [float(t.y[0]) for t in fig.data]
    px, py = pixels(xs, ys, 800.0, height - 100)
    return [(t.text[0], label_box(px[k], py[k], t.text[0], t.textposition)) for k, t in enumerate(fig.data) if t.text[0]]


def test_measure_names_beside_the_faithfulness_plausibility_points_do_not_overlap():
    """The shipped bAbI-1 pairing, where grad-l1 and grad-l2 have the same RACU and nearly the same AUPRC (their
    names printed on top of each other): every measure is named once, and no two name boxes overlap."""
    from app.faith_plausibility import figure, joined, racu_by_measure, shipped_pairing
    from app.point_labels import overlaps

    rows, plaus = shipped_pairing(ROOT / "results")
    both = joined(racu_by_measure(rows), plaus)
    assert len(both) >= 8
    fig = figure(both, "RACU %", "AUPRC", height=460)
    boxes = _label_boxes(fig, 460)
    named = [name for text, _ in boxes for name in text.split(" / ")]
    assert sorted(named) == sorted(both["measure"]), "every measure is named exactly once"
    clashes = [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:] if overlaps(box_a, box_b)]
    assert not clashes, clashes


def test_coinciding_points_share_a_label_and_near_ones_move_apart():
    from app.point_labels import label_box, overlaps, pixels, point_labels

    x, y = [0.30, 0.3001, 0.31, 0.50], [100.0, 100.0, 100.5, 160.0]
    names = ["grad-l1", "grad-l2", "loo-abs", "loo-sign"]
    texts, positions = point_labels(x, y, names, height=360)
    assert texts[:2] == ["grad-l1 / grad-l2", ""]
    px, py = pixels(x, y, 800.0, 360.0)
    boxes = [label_box(px[k], py[k], texts[k], positions[k]) for k in range(4) if texts[k]]
    assert not any(overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
