"""The Annotate page's ranking results in words (app/plausibility_words.py): the order annotators gave, whether the
leader's lead is beyond the TrueSkill ratings' uncertainty, where random landed, whether Bradley-Terry agrees, and
the annotators' agreement (Kendall's W) in words."""
from __future__ import annotations

from app.plausibility_words import agreement_word, ranking_in_words


def _ts(*rows):
    """TrueSkill rows from (measure, mu, sigma), ranked in the order given."""
    return [{"measure": m, "mu": mu, "sigma": s, "conservative": mu - 3 * s, "rank": i + 1, "matches": 10}
            for i, (m, mu, s) in enumerate(rows)]


def _bt(*measures):
    return [{"measure": m, "rank": i + 1, "strength": 1.0, "p_beats_average": 0.5, "wins": 1, "comparisons": 2}
            for i, m in enumerate(measures)]


def test_a_clear_leader_and_random_last_read_as_such():
    lines = ranking_in_words(_ts(("ig-sign", 35, 1), ("loo-sign", 25, 1), ("random", 12, 1)),
                             _bt("ig-sign", "loo-sign", "random"), {"mean_W": 0.8, "tasks": 6})
    assert lines[0] == "Annotators found ig-sign the most plausible explanation, then loo-sign, then random."
    assert "lead over loo-sign is beyond the ratings' uncertainty" in lines[1]
    assert "random baseline came last" in lines[2]
    assert "orders the measures the same way" in lines[3]
    assert "agreement on a task's order is strong (Kendall's W 0.80 over 6 tasks" in lines[4]


def test_overlapping_ratings_measures_below_random_and_a_disagreeing_bradley_terry_are_said():
    lines = " ".join(ranking_in_words(_ts(("grad-l2", 26, 3), ("random", 25, 3), ("loo-sign", 20, 3)),
                                      _bt("random", "grad-l2", "loo-sign"), {"mean_W": 0.2, "tasks": 3}))
    assert "within the ratings' uncertainty" in lines and "more rankings are needed" in lines
    assert "random baseline ranked 2 of 3: annotators found loo-sign no more plausible than random scores" in lines
    assert "Bradley-Terry puts random first instead" in lines
    assert "is very weak" in lines


def test_no_rankings_no_words_and_w_bands():
    assert ranking_in_words([], [], None) == []
    assert [agreement_word(w) for w in (0.95, 0.6, 0.35, 0.05, None, float("nan"))] == [
        "strong", "moderate", "weak", "very weak", None, None]
