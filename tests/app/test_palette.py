"""One visual language for charts (app/palette.py): a measure keeps its colour from chart to chart, the random
baseline is always drawn as a grey dotted baseline, and signed matrices use the heatmaps' orange = +1."""
from __future__ import annotations

from app import palette
from engine.colours import NEGATIVE, POSITIVE


def test_a_measure_keeps_its_colour_whatever_else_the_chart_shows():
    alone = palette.measure_colours(["ig-sign", "random"])
    crowded = palette.measure_colours(["occlusion", "lime", "random", "ig-sign", "deeplift", "grad-l2"])
    assert alone["ig-sign"] == crowded["ig-sign"]


def test_the_random_baseline_is_grey_and_dotted_never_a_measure_colour():
    colours = palette.measure_colours(["random", "ig-sign", "loo-sign"])
    assert colours["random"] == palette.BASELINE
    assert palette.BASELINE not in palette.CATEGORICAL
    style = palette.line_style("random", "#0072B2")
    assert style["color"] == palette.BASELINE and style["dash"] == "dot"
    assert "dash" not in palette.line_style("ig-sign", colours["ig-sign"])


def test_colours_are_distinct_within_a_chart_of_up_to_sixteen_measures():
    names = [f"m{i}" for i in range(12)] + ["ig-sign", "grad-l2", "loo-sign", "deeplift"]
    colours = palette.measure_colours(names)
    assert len(set(colours.values())) == len(names)


def test_signed_scale_puts_orange_at_plus_one_as_the_heatmaps_do():
    low, mid, high = palette.SIGNED_SCALE
    assert high == [1.0, "#{:02X}{:02X}{:02X}".format(*POSITIVE)]
    assert low == [0.0, "#{:02X}{:02X}{:02X}".format(*NEGATIVE)]
    assert mid[1] == "#FFFFFF"


def test_band_is_the_colour_with_opacity():
    assert palette.band("#0072B2", 0.2) == "rgba(0,114,178,0.2)"
