"""IG's convergence budget is reported while it runs and a long run stops between passes (what the Explain page shows
and cancels, app/ig_budget.py): progress in path points per input out of the budget (steps + every escalation stage),
after every forward+backward pass; a stop between two passes leaves the measures finished before it intact."""
from __future__ import annotations

import pytest

from engine.errors import ExplanationCancelled
from engine.importance import get_explainer

TEXT = "a gorgeous, witty, seductive movie that never loses its wit"


def test_ig_reports_its_budget_spent_stage_by_stage_and_ends_at_the_budget(toy_classifier):
    """tolerance 0 forces every escalation stage (20, then 60 and 180 Gauss-Legendre): the reports never go back,
    reach 20 and 80 (the stages' ends) on the way, all out of 260, and end at (260, 260)."""
    batch = toy_classifier.batch([TEXT])
    explainer = get_explainer("ig-sign", toy_classifier, tolerance=0.0, abs_tolerance=0.0, memo=False)
    assert explainer.budget() == 20 + 60 + 180
    reports: list[tuple[int, int]] = []
    imp = explainer.attribute(batch, progress=lambda done, total: reports.append((done, total)))
    done = [d for d, _ in reports]
    assert {t for _, t in reports} == {260}
    assert done == sorted(done) and {20, 80} <= set(done) and reports[-1] == (260, 260)
    assert int(imp.extras["steps_used"][0]) == 180


def test_a_stop_asked_between_passes_ends_ig_before_its_budget_is_spent(toy_classifier):
    """should_stop turning true after the first report: IG raises ExplanationCancelled at its next pass, having
    reported less than its budget."""
    batch = toy_classifier.batch([TEXT])
    explainer = get_explainer("ig-sign", toy_classifier, steps=200, max_steps=1800, tolerance=0.0, abs_tolerance=0.0,
                              memo=False)
    explainer.rows_per_pass = lambda tokens, backward=False: 16  # many passes, so "between two" is observable
    reports: list[int] = []
    with pytest.raises(ExplanationCancelled):
        explainer.attribute(batch, progress=lambda done, total: reports.append(done), should_stop=lambda: bool(reports))
    assert reports and max(reports) < explainer.budget()


def test_explain_text_streams_igs_budget_and_a_stop_from_the_callback_keeps_the_finished_measures(toy_classifier):
    """explain_text's on_steps gets (ig-sign, done, 260); an exception raised from it (what Streamlit raises in a
    page's callback when Cancel is clicked) ends the call, after on_measure had grad-l2's finished scores."""
    from engine.explain import explain_text

    class Stop(Exception):
        pass

    finished: dict[str, object] = {}
    steps: list[tuple[str, int, int]] = []

    def on_steps(measure, done, total):
        steps.append((measure, done, total))
        if done >= 80:
            raise Stop

    with pytest.raises(Stop):
        explain_text(toy_classifier, TEXT, measures=["grad-l2", "ig-sign"],
                     options={"ig-sign": {"tolerance": 0.0, "abs_tolerance": 0.0}},
                     on_measure=lambda m, r: finished.update({k: v.copy() for k, v in r.scores.items()}),
                     on_steps=on_steps)
    assert list(finished) == ["grad-l2"] and len(finished["grad-l2"]) > 0
    assert steps and all(m == "ig-sign" and t == 260 for m, _, t in steps) and steps[-1][1] == 80
