"""Explain's two models side by side (app/explain_compare.py) draw each measure's two heatmaps on one colour scale:
the largest |score| over both sides, so the same colour is the same score on both. The second model is the toy
model with its last layer scaled by 3 (the same prediction, every measure's scores three times as large): on scales
of their own the two heatmaps of a measure would look alike and read 1:3 at their ends."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from engine.models import save_classifier

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
EXPLAIN = str(Path(MAIN).parent.parent / "pages" / "explain.py")
TEXT = "a gripping , funny and often moving film"


def _scaled_head(classifier, factor: float = 3.0):
    other = copy.deepcopy(classifier)
    last = [p for name, p in other.model.named_parameters() if name.endswith(("weight", "bias"))][-2:]
    with torch.no_grad():
        for p in last:
            p.mul_(factor)
    return other


@pytest.fixture()
def two_models(models_cache, toy_classifier):
    save_classifier(toy_classifier, "toy-a")
    save_classifier(_scaled_head(toy_classifier), "toy-x3")
    return models_cache


def _scale_max(heatmap_html: str) -> str:
    found = re.search(r'class="scale-max">([^<]*)<', heatmap_html)
    assert found, heatmap_html[-400:]
    return found.group(1)


def test_side_by_side_heatmaps_of_a_measure_share_one_colour_scale(two_models):
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.run()
    at.switch_page(EXPLAIN)
    at.run()
    assert at.sidebar.selectbox[0].value == "toy-a"
    at.text_area(key="explain_text").input(TEXT)
    at.selectbox(key="explain_compare_model").set_value("toy-x3")
    at.button[0].click()
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    measures = at.multiselect(key="explain_measures").value
    heatmaps = [h.proto.body for h in at.get("html")]
    own, pairs = heatmaps[:len(measures)], heatmaps[len(measures):]
    assert len(pairs) == 2 * len(measures), "one row of two heatmaps per measure"
    for i, measure in enumerate(measures):
        left, right = pairs[2 * i], pairs[2 * i + 1]
        assert _scale_max(left) == _scale_max(right), (measure, _scale_max(left), _scale_max(right))
        # the shared scale is the larger side's own (the scaled model's); the sidebar model's own grid keeps its own
        assert _scale_max(left) != _scale_max(own[i]), measure
