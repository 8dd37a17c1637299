"""The dashboard's progress bar for frequent reports (app/progress.py): at most one update per interval reaches the
browser, but never at the cost of the first, the finished, or a stage change asked to be shown now."""
from __future__ import annotations

import pytest


@pytest.fixture()
def bar(monkeypatch):
    """A ThrottledProgress on a clock the test moves, and the updates it sent: (fraction, text) each."""
    from app import progress

    clock = {"now": 100.0}
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock["now"])
    made = progress.ThrottledProgress(0.0, text="starting ...", min_interval_s=0.25)
    sent = []
    monkeypatch.setattr(made._bar, "progress", lambda fraction, text=None: sent.append((fraction, text)))
    return made, sent, clock


def test_reports_closer_than_the_interval_are_not_sent(bar):
    made, sent, clock = bar
    for step in range(1, 101):  # 100 batches at 128 a second (a step of 1/128 s adds up exactly)
        clock["now"] = 100.0 + (step - 1) / 128
        made.update(step / 200, f"batch {step}")
    assert [text for _, text in sent] == ["batch 1", "batch 33", "batch 65", "batch 97"], "the first, one per 0.25 s"


def test_the_finished_value_and_a_stage_asked_now_are_always_sent(bar):
    made, sent, clock = bar
    made.update(0.1, "batch 1")
    assert not made.update(0.2, "batch 2")
    assert made.update(0.5, "validating", now=True)
    assert made.update(1.0, "evaluating on the test split ...")
    assert sent == [(0.1, "batch 1"), (0.5, "validating"), (1.0, "evaluating on the test split ...")]
    clock["now"] += 0.3
    assert made.update(1.7, "over") and sent[-1] == (1.0, "over"), "a fraction past 1 is shown as 1"


def test_a_training_reporter_puts_words_with_a_fraction_on_the_bar_and_the_others_on_the_line_under_it():
    """The LoRA and planting forms' reporter (app.progress.training_reporter): a batch's words move the bar, a
    validation's (no fraction) go on the line under it, in markdown-escaped form."""
    from streamlit.testing.v1 import AppTest

    def page():
        from app.progress import training_reporter

        report = training_reporter("loading ...", lambda event: (event.get("fraction"), event["words"]))
        report({"fraction": 0.5, "words": "batch 5/10"})
        report({"words": "epoch 1: validation *masked* 0.800"})

    at = AppTest.from_function(page).run()
    assert not at.exception
    bars = at.get("progress")
    assert len(bars) == 1 and bars[0].proto.value == 50 and bars[0].proto.text == "batch 5/10"
    from app.text import md

    assert [c.value for c in at.caption] == [md("epoch 1: validation *masked* 0.800")]
