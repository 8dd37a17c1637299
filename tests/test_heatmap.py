"""Heatmaps are built from escaped tokens only: no markup from the input survives as markup."""
from __future__ import annotations

import re

from app.heatmap import token_heatmap_html


def test_hostile_tokens_are_escaped():
    tokens = ["<script>alert(1)</script>", '<img src=x onerror="alert(2)">', "**bold**", "a&b", "\"'"]
    out = token_heatmap_html(tokens, [1.0, -0.5, 0.2, 0.0, float("nan")], signed=True, title="<b>measure</b>")
    assert "<script>" not in out and "<img" not in out and "<b>" not in out
    assert "&lt;script&gt;" in out and "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in out
    # the only tags are the ones the function writes
    assert set(re.findall(r"<(\w+)", out)) <= {"div", "span"}


def test_colours_follow_sign_and_magnitude():
    out = token_heatmap_html(["good", "bad", "the"], [2.0, -2.0, 0.0], signed=True)
    assert "rgba(214,39,40,1.000)" in out and "rgba(31,119,180,1.000)" in out and "rgba(214,39,40,0.000)" in out
    absolute = token_heatmap_html(["good", "the"], [3.0, 1.5], signed=False)
    assert "rgba(117,66,191,1.000)" in absolute and "rgba(117,66,191,0.500)" in absolute
    assert 'title="+2"' in out
