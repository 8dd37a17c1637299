"""A progress bar for work that reports often (a training batch, a masking step, an explained example).

Each `st.progress` update is a message to the browser, which redraws the page's elements for it. Training the tiny
model reports tens of batches a second, and a bar updated at that rate costs the browser (on the same cores as the
work itself) much more than one updated 4 times a second (docs/methods.md#notes-behind-the-code). Four updates a second read as
continuous.
"""
from __future__ import annotations

import time

import streamlit as st

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
