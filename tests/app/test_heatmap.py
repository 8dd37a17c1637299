"""Heatmaps are built from escaped tokens only: no markup from the input survives as markup; colours are
the colour-blind-safe PuOr ends and every heatmap shows its colour scale."""
from __future__ import annotations

import re

from app.heatmap import LEGEND_SIGNED, token_heatmap_html
from engine.colours import NEGATIVE, POSITIVE, UNSIGNED, hex_colour, score_rgb, text_rgb


def test_hostile_tokens_are_escaped():
    tokens = ["<script>alert(1)</script>", '<img src=x onerror="alert(2)">', "**bold**", "a&b", "\"'"]
    out = token_heatmap_html(tokens, [1.0, -0.5, 0.2, 0.0, float("nan")], signed=True, title="<b>measure</b>")
    assert "<script>" not in out and "<img" not in out and "<b>" not in out
    assert "&lt;script&gt;" in out and "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in out
    # the only tags are the ones the function writes
    assert set(re.findall(r"<(\w+)", out)) <= {"div", "span"}


def test_colours_follow_sign_and_magnitude_on_the_puor_ends():
    out = token_heatmap_html(["good", "bad", "the"], [2.0, -2.0, 0.0], signed=True)
    assert f"background:{hex_colour(POSITIVE)}" in out and f"background:{hex_colour(NEGATIVE)}" in out
    assert "background:#ffffff" in out, "a zero score is white"
    absolute = token_heatmap_html(["good", "the"], [3.0, 1.5], signed=False)
    assert f"background:{hex_colour(UNSIGNED)}" in absolute
    assert f"background:{hex_colour(score_rgb(1.5, 3.0, False))}" in absolute
    assert score_rgb(1.5, 3.0, False) == tuple(round(255 + (c - 255) * 0.5) for c in UNSIGNED), "halfway to the end colour"
    assert 'title="+2"' in out
    assert "orange" in LEGEND_SIGNED and "purple" in LEGEND_SIGNED


def test_every_heatmap_shows_its_colour_scale_with_the_end_scores():
    out = token_heatmap_html(["good", "bad"], [0.5, -2.0], signed=True)
    assert 'class="colour-scale"' in out
    assert re.search(r'class="scale-min">-2<', out) and re.search(r'class="scale-max">\+2<', out)
    absolute = token_heatmap_html(["good", "the"], [3.0, 1.5], signed=False)
    assert 'class="scale-min">0<' in absolute and 'class="scale-max">3<' in absolute


def test_text_stays_readable_on_dark_boxes():
    assert text_rgb(NEGATIVE) == (255, 255, 255), "white on the dark purple end"
    assert text_rgb((255, 255, 255)) == (0, 0, 0)
