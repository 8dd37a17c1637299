"""Figures and tables for a paper (app/figure_export.py): every chart the pages draw is offered as PNG, SVG and PDF,
each a valid file of its kind redrawn from the chart's own data in the chart's colours; every table as CSV, whose
formula-like cells are neutralised (engine.csv_safe) and whose numbers stay numbers."""
from __future__ import annotations

import io
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

from app.figure_export import FORMATS, colour, csv_bytes, figure_bytes, to_matplotlib

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
pytestmark = pytest.mark.usefixtures("one_thread")


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=300)


def assert_valid(data: bytes, fmt: str) -> None:
    """`data` is a whole file of kind `fmt`: a PNG that decodes to pixels, an SVG that parses as an <svg> document,
    a PDF with its header and end-of-file marker."""
    if fmt == "png":
        import matplotlib.image

        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        pixels = matplotlib.image.imread(io.BytesIO(data), format="png")
        assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100
    elif fmt == "svg":
        root = ET.fromstring(data)
        assert root.tag.endswith("svg")
    else:
        assert data.startswith(b"%PDF-") and b"%%EOF" in data[-64:]


def test_a_chart_with_a_band_a_log_axis_lines_and_notes_exports_to_each_format_in_its_colours():
    """The masking chart's kinds of trace (a filled grey band, a dotted baseline, a measure's line in its palette
    colour, a vertical line, a note placed on a log axis) come out in each format; the SVG holds the measure's colour."""
    import numpy as np

    fig = go.Figure()
    x = [0.0, 0.5, 1.0]
    fig.add_trace(go.Scatter(x=x + x[::-1], y=[0.9, 0.6, 0.4, 0.2, 0.4, 0.7], fill="toself", line={"width": 0},
                             fillcolor="rgba(127,127,127,0.25)", name="random (min-max)"))
    fig.add_trace(go.Scatter(x=x, y=[0.8, 0.5, 0.3], name="random (mean)", line={"color": "#7F7F7F", "dash": "dot"}))
    fig.add_trace(go.Scatter(x=x, y=[0.8, 0.2, 0.1], name="loo-sign", line={"color": "#009E73", "width": 3}))
    fig.add_vline(x=0.5, line_dash="dot")
    fig.add_annotation(x=1, xref="paper", y=np.log10(0.05), yref="y", text="below 0.05", showarrow=False)
    fig.update_layout(title="p(positive) <b>as</b> tokens are masked", xaxis_tickformat=".0%", yaxis_type="log",
                      xaxis_title="fraction masked", yaxis_title="p($)")
    for fmt in FORMATS:
        assert_valid(figure_bytes(fig, fmt), fmt)
    svg = figure_bytes(fig, "svg").decode()
    assert "#009e73" in svg.lower(), "the measure keeps its palette colour"
    drawn = to_matplotlib(fig).axes[0]
    assert drawn.get_title() == "p(positive) as tokens are masked" and drawn.get_yscale() == "log"
    assert [t.get_text() for t in drawn.get_legend().get_texts()] == ["random (min-max)", "random (mean)", "loo-sign"]


def test_plotlys_colour_notations_are_read_as_the_browser_reads_them():
    assert colour("#009E73") == pytest.approx((0.0, 158 / 255, 115 / 255, 1.0))
    assert colour("rgba(127, 127, 127, 0.25)") == pytest.approx((127 / 255,) * 3 + (0.25,))
    assert colour("hsl(0,100%,50%)") == pytest.approx((1.0, 0.0, 0.0, 1.0))
    assert colour("hsla(120,100%,25%,0.15)") == pytest.approx((0.0, 0.5, 0.0, 0.15))
    assert colour("gray") == pytest.approx((128 / 255,) * 3 + (1.0,))


def test_a_tables_csv_neutralises_formula_cells_and_keeps_numbers():
    """Cells a spreadsheet would run (= + - @, a leading tab or carriage return, or spaces before them) get a leading
    apostrophe; plain numbers, also as text, and numeric columns stay as they are."""
    frame = pd.DataFrame({"measure": ["=HYPERLINK(\"http://evil\")", "+1+1", "-cmd", "@SUM(A1)", "\t=1", "  =2",
                                      "loo-sign"],
                          "as text": ["-0.25", "+1e-3", "x", "y", "z", "w", "v"],
                          "racu_pct": [1.5, -2.0, 3.0, 4.0, 5.0, 6.0, -7.25]})
    back = pd.read_csv(io.StringIO(csv_bytes(frame).decode("utf-8")), keep_default_na=False)
    assert list(back["measure"]) == ["'=HYPERLINK(\"http://evil\")", "'+1+1", "'-cmd", "'@SUM(A1)", "'\t=1", "'  =2",
                                     "loo-sign"]
    assert list(back["as text"][:2]) == ["-0.25", "+1e-3"], "a plain number in a text column is left as it is"
    assert list(back["racu_pct"]) == [1.5, -2.0, 3.0, 4.0, 5.0, 6.0, -7.25]


@pytest.fixture()
def shipped_results(models_cache, tmp_path, monkeypatch):
    results = tmp_path / "results"
    for run in ("tiny-rt-3seeds", "bilstm-rt-roar", "tiny-rt-budget"):
        shutil.copytree(ROOT / "results" / run, results / run)
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(results))
    return results


def _charts_and_downloads(at: AppTest) -> tuple[list[go.Figure], set[str]]:
    figures = [pio.from_json(c.proto.spec) for c in at.get("plotly_chart")]
    downloads = {b.proto.label for b in at.get("download_button")}
    return figures, downloads


def test_every_benchmarks_chart_exports_to_png_svg_and_pdf_and_every_table_has_its_csv(shipped_results):
    """Every part of the Benchmarks page: each chart has its PNG, SVG and PDF buttons and each of its files is valid;
    the ranking table's CSV is offered beside it."""
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    at.switch_page(str(ROOT / "pages" / "benchmarks.py"))
    _run(at)
    assert any(b.proto.id.endswith("bench_ranking_csv") for b in at.get("download_button")), "the ranking's CSV"
    seen = 0
    for part in ("curves", "masf", "roar", "budget"):
        at.segmented_control(key="bench_part").set_value(part)
        _run(at)
        figures, downloads = _charts_and_downloads(at)
        assert figures, part
        assert {"PNG", "SVG", "PDF"} <= downloads, (part, downloads)
        for fig in figures:
            for fmt in FORMATS:
                assert_valid(figure_bytes(fig, fmt), fmt)
            seen += 1
    assert seen >= 4
    # the plausibility part's chart (points with error bars both ways and names beside them), on the shipped pairing
    from app.faith_plausibility import figure, joined, racu_by_measure, shipped_pairing

    rows, plaus = shipped_pairing(ROOT / "results")
    scatter = figure(joined(racu_by_measure(rows), plaus), "RACU %", "AUPRC")
    for fmt in FORMATS:
        assert_valid(figure_bytes(scatter, fmt), fmt)


def test_the_explain_and_masking_charts_export(models_cache, toy_classifier):
    """Explain's agreement matrix (a heatmap on the heatmaps' signed scale, with its numbers in the cells) and the
    masking page's two charts (curves; MaSF p-values on a log axis) come out as valid files."""
    from engine.models import save_classifier

    save_classifier(toy_classifier, "toy-fig")
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params.update({"model": "toy-fig", "text": "the film was dull but the cast was great",
                            "measures": "grad-l2,loo-sign"})
    _run(at)
    figures, downloads = _charts_and_downloads(at)
    (agreement,) = figures
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["coloraxis"]["colorscale"][-1][1] == "#E66101", \
        "agree (+1) is orange, as 'supports' is in the heatmaps"
    assert {"PNG", "SVG", "PDF"} <= downloads
    for fmt in FORMATS:
        assert_valid(figure_bytes(agreement, fmt), fmt)
    texts = [t.get_text() for t in to_matplotlib(agreement).axes[0].texts]
    assert "1.00" in texts, "the matrix's numbers are in its cells"

    at.button(key="explain_to_masking").click()
    _run(at)
    figures, _ = _charts_and_downloads(at)
    assert len(figures) == 2
    for fig in figures:
        for fmt in FORMATS:
            assert_valid(figure_bytes(fig, fmt), fmt)
