"""Public compute is bounded when served to a network (app/limits.py): a request's model rows and seconds, a
browser session's computations per minute, the server's computations at once; each refusal says what was refused
and which limit refused it. The admin and a loopback server are not bounded."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from app import admin, limits
from app.limits import PublicLimitError, ServerSlots, check_rate, row_cap
from engine.explain import explain_text
from engine.faithfulness.cost import counting_rows

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
SECRET = "correct horse battery staple"
TEXT = "a gorgeous , witty , seductive movie that never drags"
pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_row_cap_counts_exactly_the_rows_the_cost_meter_counts_and_stops_beyond_it(toy_classifier):
    """Under a generous cap the count equals engine.faithfulness.cost's for the same explanation; under a cap of
    3 rows LOO (N + 1 rows) is stopped, named in the result's errors with the variable that set the cap, while
    the gradient measure (1 row) before it completes."""
    module = toy_classifier.counted_module
    with counting_rows(module) as meter, row_cap(module, 10_000, 60, "Explain") as used:
        explain_text(toy_classifier, TEXT, measures=["grad-l2", "loo-sign"])
    assert used["rows"] == meter.forward + meter.backward > 3
    with row_cap(module, 3, 60, "Explain"):  # another text: the memo would answer the same one without the model
        result = explain_text(toy_classifier, TEXT + " at all", measures=["grad-l2", "loo-sign"])
    assert "grad-l2" in result.scores and "loo-sign" not in result.scores
    assert "ENGINE_PUBLIC_MAX_ROWS" in result.errors["loo-sign"] and "3 model rows" in result.errors["loo-sign"]


def test_the_row_cap_stops_a_request_past_its_seconds(toy_classifier):
    ticks = iter(range(0, 1000, 40))  # every look at the clock is 40 s later
    with row_cap(toy_classifier.counted_module, 10_000, 60, "Step-by-step masking", clock=lambda: next(ticks)):
        result = explain_text(toy_classifier, TEXT + " twice", measures=["grad-l2", "loo-sign"])
    assert all("ENGINE_PUBLIC_MAX_SECONDS" in why and "60 s" in why for why in result.errors.values())


def test_another_threads_rows_are_neither_counted_nor_stopped(toy_classifier):
    """The model is shared by every session: one visitor's cap never stops another's forward pass."""
    batch = toy_classifier.batch(["a fine film"] * 8)
    errors = []

    def other_session():
        try:
            with torch.no_grad():
                toy_classifier.logits(batch)
        except PublicLimitError as err:
            errors.append(err)

    with row_cap(toy_classifier.counted_module, 1, 60, "Explain") as used:
        t = threading.Thread(target=other_session)
        t.start()
        t.join()
    assert not errors and used["rows"] == 0


@pytest.mark.parametrize(("earlier", "now", "per_minute", "refused"), [
    ([], 100.0, 1, False),
    ([99.0], 100.0, 1, True),
    ([30.0], 100.0, 1, False),          # left the 60 s window
    ([50.0, 90.0], 100.0, 3, False),
    ([50.0, 60.0, 90.0], 100.0, 3, True),
])
def test_a_browser_session_may_start_per_minute_computations_in_any_minute(earlier, now, per_minute, refused):
    started = list(earlier)
    if refused:
        with pytest.raises(PublicLimitError, match="ENGINE_PUBLIC_PER_MINUTE") as err:
            check_rate(started, now, per_minute, "Explain")
        assert "Explain refused" in str(err.value) and "Try again in" in str(err.value)
    else:
        check_rate(started, now, per_minute, "Explain")
        assert started[-1] == now and all(now - t < 60 for t in started)


def test_the_server_runs_at_most_the_concurrent_limit_of_visitors_computations():
    slots = ServerSlots()
    slots.acquire(2, "Explain")
    slots.acquire(2, "Explain")
    with pytest.raises(PublicLimitError, match=r"Explain refused: 2 visitors' computations .*ENGINE_PUBLIC_CONCURRENT=2"):
        slots.acquire(2, "Explain")
    slots.release()
    slots.acquire(2, "Explain")  # a slot freed is a slot again


def test_admitted_releases_its_slot_however_the_computation_ends(monkeypatch):
    monkeypatch.setattr(limits, "applies", lambda: True)
    monkeypatch.setenv("ENGINE_PUBLIC_CONCURRENT", "1")
    monkeypatch.setattr(limits, "SLOTS", ServerSlots())
    state: dict = {}
    with pytest.raises(RuntimeError), limits.admitted("Explain", state):
        assert limits.SLOTS.running == 1
        raise RuntimeError("a bug in the middle")
    assert limits.SLOTS.running == 0 and len(state[limits.RATE_KEY]) == 1


def test_a_bad_limit_setting_is_refused_naming_the_variable(monkeypatch):
    from engine.errors import InvalidInputError

    monkeypatch.setenv("ENGINE_PUBLIC_MAX_ROWS", "-5")
    with pytest.raises(InvalidInputError, match="ENGINE_PUBLIC_MAX_ROWS must be a positive number"):
        limits.limits()


def _explain(at: AppTest) -> AppTest:
    if not any(w.key == "explain_text" for w in at.text_area):  # the app opens on the home page
        at.switch_page(str(ROOT / "pages" / "explain.py")).run(timeout=180)
    at.text_area(key="explain_text").input(TEXT)
    next(b for b in at.button if b.label == "Explain").click()
    at.run(timeout=180)
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.mark.parametrize("signed_in", [False, True], ids=["anonymous", "admin"])
def test_served_to_a_network_the_explain_page_bounds_a_visitor_and_not_the_admin(
        monkeypatch, models_cache, toy_classifier, signed_in):
    """A visitor's Explain stops at the row cap (the cheap measures shown, the rest named with the cap) and a
    second request within the minute is refused by the session rate; the admin's is neither."""
    from engine.models import save_classifier

    save_classifier(toy_classifier, "toy-limits")
    monkeypatch.setenv(admin.NETWORK_ENV, "1")
    monkeypatch.setenv(admin.SECRET_ENV, SECRET)
    monkeypatch.setenv("ENGINE_PUBLIC_MAX_ROWS", "3")
    monkeypatch.setenv("ENGINE_PUBLIC_PER_MINUTE", "1")
    monkeypatch.setattr(limits, "SLOTS", ServerSlots())
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.run(timeout=180)
    if signed_in:
        at.sidebar.text_input(key="admin_secret_input").input(SECRET)
        next(b for b in at.sidebar.button if b.label == "Sign in").click()
        at.run(timeout=180)
    _explain(at)
    first = " ".join(w.value for w in at.warning)
    _explain(at)
    second = " ".join(w.value for w in at.warning)
    if signed_in:
        assert "ENGINE_PUBLIC" not in first + second
    else:
        assert "ENGINE\\_PUBLIC\\_MAX\\_ROWS" in first and "loo" in first
        assert "ENGINE\\_PUBLIC\\_PER\\_MINUTE" in second and "Explain refused" in second
    assert limits.SLOTS.running == 0
