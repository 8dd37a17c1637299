"""app/interaction_view.py: the pairs table is built from escaped words, shows the top pairs largest first with the
signed colours, and appears only for a measure that gives pairs."""
from __future__ import annotations

from types import SimpleNamespace

from app.interaction_view import pairs_html, show_pairs
from engine.importance.interactions import PairInteractions

PAIRS = PairInteractions(index="k-SII", level="word", players=((0,), (1, 2), (3,)), first_order=(0.1, 0.2, 0.3),
                         pairs=((0, 1, -0.5), (1, 2, 0.25), (0, 2, 0.0)), baseline=0.0, budget=8, exact=True)
TEXT = "a <script>x</script> film"
OFFSETS = [(0, 1), (2, 10), (10, 20), (21, 25)]
TOKENS = ["a", "<script>", "x</script>", "film"]


def test_the_words_are_escaped_and_the_pairs_come_largest_first():
    out = pairs_html(PAIRS, TEXT, OFFSETS, TOKENS)
    assert "<script>" not in out and "&lt;script&gt;x&lt;/script&gt;" in out
    assert out.index("-0.5000") < out.index("+0.2500") < out.index("+0.0000")
    assert "OR-like" in out and "AND-like" in out and "exact" in out
    assert "Top 2" in pairs_html(PAIRS, TEXT, OFFSETS, TOKENS, k=2)


def test_only_a_measure_with_pairs_gets_the_view():
    drawn = []
    col = SimpleNamespace(html=drawn.append, caption=drawn.append)
    result = SimpleNamespace(extras={"loo-sign": {}, "shapley-interactions": {"interactions": [PAIRS]}}, text=TEXT,
                             offsets=OFFSETS, tokens=TOKENS)
    show_pairs(col, result, "loo-sign")
    assert drawn == []
    show_pairs(col, result, "shapley-interactions")
    assert len(drawn) == 1 and 'class="interaction-pairs"' in drawn[0]
