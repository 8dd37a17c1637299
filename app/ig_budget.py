"""Integrated gradients' convergence budget on the Explain page: the step options (starting steps, the step budget
IG escalates to where the scores do not add up, the tolerance), the budget spent while it runs (path points per input,
after every forward+backward pass: engine.importance.integrated_gradients), and, after a stop, how far it got.

Stopping: every progress report sends a message to the browser, and Streamlit ends a running script at its next
message once any widget is used (the page's Cancel button), so a long IG stops between two passes; the measures
finished before it stay shown (the page keeps each one as it finishes).
"""
from __future__ import annotations

import time

import streamlit as st

from engine.importance.completeness import escalation
from engine.importance.integrated_gradients import IntegratedGradientsSign

IG_MEASURES = ("ig-sign", "ig-abs")
STEPS_KEY, BUDGET_KEY, TOLERANCE_KEY = "explain_ig_steps", "explain_ig_max_steps", "explain_ig_tolerance"
ABS_TOLERANCE_KEY = "explain_ig_abs_tolerance"
#: widget key -> the option of IG's own defaults it starts from
OPTION_OF = {STEPS_KEY: "steps", BUDGET_KEY: "max_steps", TOLERANCE_KEY: "tolerance", ABS_TOLERANCE_KEY: "abs_tolerance"}
SPENT_KEY = "explanation_ig_spent"  # (measure, points done, budget) of the IG run in progress, or None
MIN_INTERVAL_S = 0.25  # app/progress.py: four updates a second read as continuous and cost the browser little


def ig_options(measures: list[str]) -> dict[str, dict]:
    """The step options of the IG measures among `measures` (an expander with three inputs, drawn only when one is
    chosen), as explain_text's `options`; {} without IG."""
    if not any(m in IG_MEASURES for m in measures):
        return {}
    for key, value in defaults().items():
        st.session_state.setdefault(key, value)
    with st.expander(f"Integrated gradients' step budget: {budget_words(steps(), max_steps())}"):
        c1, c2, c3, c4 = st.columns(4)
        c1.number_input("Starting steps", 1, 1000, key=STEPS_KEY,
                        help="IG's path points per input on the first try (midpoint rule).")
        c2.number_input("Step budget (max steps)", 1, 5000, key=BUDGET_KEY,
                        help="Where the scores do not add up to f(x) - f(baseline) within the tolerance, IG is "
                             "recomputed with 3x, 9x, ... the steps (Gauss-Legendre) up to this many; equal to the "
                             "starting steps: no escalation.")
        c3.number_input("Tolerance (share of f(x) - f(baseline))", 0.0, 1.0, step=0.01, key=TOLERANCE_KEY,
                        help="The completeness gap allowed, relative to f(x) - f(baseline).")
        c4.number_input("Least tolerance (logits)", 0.0, 10.0, step=0.01, key=ABS_TOLERANCE_KEY,
                        help="The gap allowed however small f(x) - f(baseline) is (the larger of the two counts).")
        st.caption("A prompted LLM's IG often needs the whole budget (SmolLM2: 180 steps); Estimate the time says what "
                   "it will cost, and Cancel stops it between two passes.")
    options = {"steps": steps(), "max_steps": max(max_steps(), steps()),
               "tolerance": float(st.session_state[TOLERANCE_KEY]),
               "abs_tolerance": float(st.session_state[ABS_TOLERANCE_KEY])}
    return {m: options for m in IG_MEASURES if m in measures}


def defaults() -> dict[str, float]:
    """The widgets' starting values: the measure's own defaults, read when the page runs (one source: the engine's
    `IntegratedGradientsSign.defaults`, which ig-abs shares), not a copy of them."""
    return {key: IntegratedGradientsSign.defaults[option] for key, option in OPTION_OF.items()}


def steps() -> int:
    return int(st.session_state.get(STEPS_KEY, defaults()[STEPS_KEY]))


def max_steps() -> int:
    return int(st.session_state.get(BUDGET_KEY, defaults()[BUDGET_KEY]))


def budget(k: int, top: int) -> int:
    """Path points per input at most: `k` and every escalation stage up to `top` (20 + 60 + 180 = 260)."""
    return k + sum(n for _, n in escalation("midpoint", k, max(top, k)))


def budget_words(k: int, top: int) -> str:
    """'20 steps, up to 180 where the scores do not add up (260 path points at most)'."""
    if top <= k:
        return f"{k} steps, no escalation"
    return f"{k} steps, up to {top} where the scores do not add up ({budget(k, top)} path points at most)"


def spent_words(measure: str, done: int, total: int) -> str:
    """'ig-sign: 80 of up to 260 path points': IG's budget spent so far."""
    return f"{measure}: {done} of up to {total} path points"


class StepReporter:
    """The page's `on_steps`: keeps the budget spent in the session (what a stop reports) and shows it on the page's
    progress bar at most every MIN_INTERVAL_S seconds (each shown report is where a Cancel click stops the run)."""

    def __init__(self, bar, order: list[str], done_measures):
        self.bar, self.order, self.done_measures = bar, order, done_measures
        self._sent_at: float | None = None
        st.session_state[SPENT_KEY] = None

    def __call__(self, measure: str, done: int, total: int) -> None:
        st.session_state[SPENT_KEY] = (measure, done, total) if done < total else None
        now = time.monotonic()
        if done < total and self._sent_at is not None and now - self._sent_at < MIN_INTERVAL_S:
            return
        self._sent_at = now
        finished = self.done_measures()
        share = (finished + done / max(total, 1)) / max(len(self.order), 1)
        self.bar.progress(min(share, 1.0), text=f"computing {spent_words(measure, done, total)} "
                                                f"({finished}/{len(self.order)} measures done); Cancel stops it")


def stopped_words() -> str | None:
    """Where IG stood when the run was stopped ('ig-sign had computed 80 of up to 260 path points'), or None."""
    spent = st.session_state.get(SPENT_KEY)
    if not spent:
        return None
    measure, done, total = spent
    return f"{measure} had computed {done} of up to {total} path points"


def _bounded(kind, low, high):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            return None
        return value if low <= value <= high else None
    return parse


#: the URL's view of the step options (app/share.py's fields): a shared view reproduces IG's budget too
URL_FIELDS = {"ig_steps": (STEPS_KEY, _bounded(int, 1, 1000)), "ig_max_steps": (BUDGET_KEY, _bounded(int, 1, 5000)),
              "ig_tolerance": (TOLERANCE_KEY, _bounded(float, 0.0, 1.0)),
              "ig_abs_tolerance": (ABS_TOLERANCE_KEY, _bounded(float, 0.0, 10.0))}


def url_view(options: dict[str, dict]) -> dict[str, str]:
    """The step options in the URL where IG is chosen and they are not the defaults ({} otherwise)."""
    chosen = next(iter(options.values()), None)
    if chosen is None or all(chosen[option] == value for option, value in
                             zip(OPTION_OF.values(), defaults().values())):
        return {}
    return {"ig_steps": str(chosen["steps"]), "ig_max_steps": str(chosen["max_steps"]),
            "ig_tolerance": f"{chosen['tolerance']:g}", "ig_abs_tolerance": f"{chosen['abs_tolerance']:g}"}
