"""Readable and shareable pages without a browser (AppTest): the Benchmarks area table labelled for a reader,
and the Explain page applying a view from the URL and writing its view back."""
from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest
from test_app import MAIN, _run, _tidy, results_store

from engine.models import save_classifier


def test_benchmarks_area_table_names_units_and_the_better_direction(models_cache, tmp_path, monkeypatch):
    store = results_store(tmp_path, monkeypatch)
    for seed in range(2):
        store.write_cell("demo", {"m": "random", "s": seed}, _tidy("random", seed, 0.2), {})
        store.write_cell("demo", {"m": "loo-sign", "s": seed}, _tidy("loo-sign", seed, 0.35), {})
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "benchmarks.py"))
    _run(at)
    config = json.loads(at.dataframe[0].proto.columns)
    assert config["racu_pct"]["label"] == "RACU % (higher: more faithful)"
    assert config["acu_pct"]["label"] == "ACU % (higher: more faithful)" and "%" in config["acu_pct"]["help"]
    assert config["racu_clipped_pct"]["label"].startswith("RACU clipped to ±100 %")
    assert config["acu_low"]["label"] == "ACU 95% CI low"
    order = list(at.dataframe[0].proto.column_order)
    assert order[:2] == ["measure", "racu_pct"], "the measure and its RACU come first"
    assert "dataset" not in order, "a column the filters fix (one value) is not repeated on every row"
    fmm = next(d for d in at.dataframe if "acu_plus" in d.value.columns)  # FMM's published Table 1
    published = json.loads(fmm.proto.columns)
    assert published["acu_pct"]["label"] == "ACU % (higher: more faithful)"
    assert "racu_pct" in at.dataframe[0].value.columns, "the data keep their names (the CSV download is unchanged)"


def test_explain_applies_a_view_from_the_url_and_writes_its_view_back(models_cache, toy_classifier):
    save_classifier(toy_classifier, "toy-url")
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.query_params.update({"model": "toy-url", "text": "an unredeemable mess", "measures": "loo-sign,ig-sign",
                            "level": "word", "agg": "max-abs"})
    _run(at)
    assert at.text_area(key="explain_text").value == "an unredeemable mess"
    assert at.multiselect(key="explain_measures").value == ["loo-sign", "ig-sign"]
    heatmaps = [h.proto.body for h in at.get("html")]
    assert len(heatmaps) == 2 and all("unredeemable" in h and "##" not in h for h in heatmaps), "words, explained at once"
    view = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert view["target"] == "predicted", "the whole view is written back to the URL (target was not given)"
    assert view["level"] == "word" and view["agg"] == "max-abs"
    assert view["measures"] == "loo-sign,ig-sign" and view["model"] == "toy-url" and view["text"] == "an unredeemable mess"
