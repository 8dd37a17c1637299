"""Running the dashboard in Streamlit's AppTest (tests/app/): a run that raised fails the test with the messages."""
from __future__ import annotations


def run_without_exception(at, timeout: float = 120):
    """`at.run(timeout=timeout)`, asserting no exception box came out of it; returns `at`."""
    at.run(timeout=timeout)
    assert not at.exception, [e.message for e in at.exception]
    return at
