"""A progress bar for work that reports often (a training batch, a masking step, an explained example).

Each `st.progress` update is a message to the browser, which redraws the page's elements for it. Training the tiny
model reports tens of batches a second, and a bar updated at that rate costs the browser (on the same cores as the
work itself) much more than one updated 4 times a second (docs/methods.md#notes-behind-the-code). Four updates a second read as
continuous.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st

from app.text import md

#: The least time between two updates sent to the browser, in seconds.
MIN_INTERVAL_S = 0.25


class ThrottledProgress:
    """`st.progress` drawn where it is made; `update` sends a value on at most every MIN_INTERVAL_S seconds, but
    always the first, a finished one (fraction 1.0) and one asked for with `now=True` (a stage that changes: its words
    must not wait for the next report, which may be long in coming)."""

    def __init__(self, fraction: float = 0.0, text: str | None = None, min_interval_s: float = MIN_INTERVAL_S):
        self._bar = st.progress(fraction, text=text)
        self._min_interval_s = min_interval_s
        self._sent_at: float | None = None  # nothing sent by update yet

    def update(self, fraction: float, text: str | None = None, now: bool = False) -> bool:
        """Show `fraction` (0 to 1) and `text`, unless the last update was sent less than the interval ago;
        returns whether it was sent."""
        clock = time.monotonic()
        if not (now or fraction >= 1.0 or self._sent_at is None or clock - self._sent_at >= self._min_interval_s):
            return False
        self._bar.progress(min(max(fraction, 0.0), 1.0), text=text)
        self._sent_at = clock
        return True

    def empty(self) -> None:
        self._bar.empty()


def training_reporter(first_text: str, words_of: Callable[[dict], tuple[float | None, str]]) -> Callable[[dict], None]:
    """A progress bar (`first_text` until the first event) and a line under it, drawn where this is called, and the
    callback that shows a training's progress events on them: `words_of(event)` gives (fraction done or None, words);
    words with a fraction go on the bar, those without (a validation) on the line. The Models page's LoRA and
    planting forms use it."""
    bar = ThrottledProgress(0.0, text=first_text)
    log = st.empty()

    def report(event: dict) -> None:
        fraction, words = words_of(event)
        if fraction is None:
            log.caption(md(words))
        else:
            bar.update(fraction, words)

    return report
