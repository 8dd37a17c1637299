"""Bounds on what an anonymous visitor computes when the dashboard is served to a network (the public actions of
app/availability.py: Explain and step-by-step masking). Three limits, each refusing with a message that says
what was refused and why (docs/configuration.md, settings in engine/settings.py):

- per request: at most ENGINE_PUBLIC_MAX_ROWS model rows (one row = one input through the model; a pass with a
  gradient counts as one row too) and ENGINE_PUBLIC_MAX_SECONDS seconds. Counted by a forward pre-hook on the
  model (engine.faithfulness.cost's way), for the request's own thread only: the model is shared by every
  session, and another visitor's rows are not this one's. Passing either stops the computation at its next
  forward pass with PublicLimitError (the Explain page then shows the measures done so far);
- per browser session: at most ENGINE_PUBLIC_PER_MINUTE computations started in any 60 seconds;
- per server: at most ENGINE_PUBLIC_CONCURRENT visitors' computations running at once.

The admin and a server on loopback are not bounded (the admin may train and run sweeps anyway).

    with admitted("Explain"):                 # the session's rate and a server-wide slot
        with capped(classifier, "Explain"):   # the request's rows and seconds
            explain_text(...)
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass

from engine.errors import EngineError
from engine.settings import public_limit_request

RATE_KEY = "public_compute_started"  # st.session_state: monotonic times of this session's admitted computations
WINDOW_S = 60.0


class PublicLimitError(EngineError):
    """A visitor's computation refused or stopped by one of the public limits; the message names the limit."""


@dataclass(frozen=True)
class Limits:
    max_rows: int
    max_seconds: float
    per_minute: int
    concurrent: int


def limits() -> Limits:
    """The limits now in force (read from the environment each time, so a test or an operator can change them)."""
    return Limits(max_rows=int(public_limit_request("ENGINE_PUBLIC_MAX_ROWS")),
                  max_seconds=float(public_limit_request("ENGINE_PUBLIC_MAX_SECONDS")),
                  per_minute=int(public_limit_request("ENGINE_PUBLIC_PER_MINUTE")),
                  concurrent=int(public_limit_request("ENGINE_PUBLIC_CONCURRENT")))


def applies() -> bool:
    """Served to a network, to a session that is not the admin."""
    from app.admin import is_admin, served_to_network

    return served_to_network() and not is_admin()


# -- per browser session ------------------------------------------------------------------------------------------
def check_rate(started: list[float], now: float, per_minute: int, what: str) -> None:
    """Refuse when `started` (times in seconds) holds `per_minute` or more within the last WINDOW_S of `now`;
    else record `now`. Drops the times that left the window."""
    started[:] = [t for t in started if now - t < WINDOW_S]
    if len(started) >= per_minute:
        wait = WINDOW_S - (now - started[0])
        raise PublicLimitError(
            f"{what} refused: this browser session has started {len(started)} computations in the last minute, the "
            f"most a visitor may (ENGINE_PUBLIC_PER_MINUTE={per_minute}) on this shared server. Try again in "
            f"{max(1, round(wait))} s, or sign in as the admin.")
    started.append(now)


# -- per server ---------------------------------------------------------------------------------------------------
class ServerSlots:
    """Visitors' computations running at once in this process (Streamlit serves every session from one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0

    def acquire(self, limit: int, what: str) -> None:
        with self._lock:
            if self.running >= limit:
                raise PublicLimitError(
                    f"{what} refused: {self.running} visitors' computations are running on this server, the most at "
                    f"once (ENGINE_PUBLIC_CONCURRENT={limit}). Try again in a moment, or sign in as the admin.")
            self.running += 1

    def release(self) -> None:
        with self._lock:
            self.running = max(0, self.running - 1)


SLOTS = ServerSlots()


@contextmanager
def admitted(what: str, session_state: MutableMapping | None = None, clock: Callable[[], float] = time.monotonic
             ) -> Iterator[None]:
    """Around one public computation: checks this session's rate, then takes a server-wide slot for the block
    (released however it ends). Does nothing for the admin or on loopback."""
    if not applies():
        yield
        return
    if session_state is None:
        import streamlit as st

        session_state = st.session_state
    lim = limits()
    started = session_state.setdefault(RATE_KEY, [])
    check_rate(started, clock(), lim.per_minute, what)
    SLOTS.acquire(lim.concurrent, what)
    try:
        yield
    finally:
        SLOTS.release()


# -- per request --------------------------------------------------------------------------------------------------
@contextmanager
def row_cap(module, max_rows: int, max_seconds: float, what: str, clock: Callable[[], float] = time.monotonic
            ) -> Iterator[dict]:
    """Within the block, the calling thread's forward passes through `module` may total `max_rows` rows and run
    until `max_seconds` after entry; the pass that would go beyond raises PublicLimitError. Yields the count
    ({'rows': n}); other threads' passes are neither counted nor stopped."""
    owner = threading.get_ident()
    start = clock()
    used = {"rows": 0}

    def hook(_module, args, kwargs):
        if threading.get_ident() != owner:
            return
        x = kwargs.get("input_ids")
        if x is None:
            x = kwargs.get("inputs_embeds")
        if x is None and args:
            x = args[0]
        rows = int(x.shape[0]) if getattr(x, "shape", None) is not None and len(x.shape) else 1
        if used["rows"] + rows > max_rows:
            raise PublicLimitError(
                f"{what} stopped: it needs more than {max_rows:,} model rows (inputs through the model), the most one "
                f"visitor's request may use on this shared server (ENGINE_PUBLIC_MAX_ROWS). Choose cheaper measures "
                f"or a shorter text, or sign in as the admin.")
        elapsed = clock() - start
        if elapsed > max_seconds:
            raise PublicLimitError(
                f"{what} stopped after {elapsed:.0f} s: one visitor's request may run {max_seconds:g} s on this "
                f"shared server (ENGINE_PUBLIC_MAX_SECONDS). Choose cheaper measures or a shorter text, or sign in "
                f"as the admin.")
        used["rows"] += rows

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield used
    finally:
        handle.remove()


@contextmanager
def capped(classifier, what: str) -> Iterator[dict | None]:
    """`row_cap` on the classifier's model with the limits in force, for a visitor served to a network; nothing
    (yields None) for the admin or on loopback."""
    if not applies():
        yield None
        return
    lim = limits()
    with row_cap(classifier.counted_module, lim.max_rows, lim.max_seconds, what) as used:
        yield used
