"""`python -m app.serve [streamlit run options]`: `streamlit run app/main.py` that stops when asked.

Streamlit (1.67, on uvicorn) answers SIGTERM with "Stopping..." and then waits for every open connection to
close, with no time limit (uvicorn's `timeout_graceful_shutdown` is left unset). A browser that died without
closing its connection (its machine asleep or gone, or a frozen tab) stops reading, so the server's unsent
messages to it stay queued, the connection never finishes closing, and the server never exits: only SIGKILL ended
it. Here the graceful part is bounded: open connections get GRACE_S seconds to close (then uvicorn cancels them
and runs the app's own shutdown), and should the process still be alive HARD_LIMIT_S after the first signal, it
exits at once (the dashboard's stores are SQLite transactions and atomic file writes, so nothing half-written
remains). scripts/start.sh and the study drills start the server through here; tests/app/test_serve_stop.py checks
that it exits on SIGTERM within the bound with a frozen browser attached.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

APP = str(Path(__file__).resolve().parent / "main.py")
GRACE_S = 5.0  # open connections' time to close after a stop signal
HARD_LIMIT_S = 15.0  # after the first stop signal the process is gone by then, whatever holds it
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)

_watchdog: threading.Timer | None = None


def _arm_watchdog() -> None:
    """On the first stop signal: a daemon timer that ends the process HARD_LIMIT_S later if it is still alive."""
    global _watchdog
    if _watchdog is None:
        _watchdog = threading.Timer(HARD_LIMIT_S, _exit_now)
        _watchdog.daemon = True
        _watchdog.start()


def _exit_now() -> None:
    print(f"  Still stopping after {HARD_LIMIT_S:g} s: exiting now.", file=sys.stderr, flush=True)
    os._exit(0)


def _bound_shutdown() -> None:
    """Give uvicorn a graceful-shutdown limit and chain the watchdog before Streamlit's own signal handler."""
    from streamlit.web import bootstrap
    from streamlit.web.server.starlette import starlette_server

    uvicorn_kwargs = starlette_server._get_uvicorn_config_kwargs

    def with_shutdown_limit() -> dict:
        return {**uvicorn_kwargs(), "timeout_graceful_shutdown": GRACE_S}

    starlette_server._get_uvicorn_config_kwargs = with_shutdown_limit
    set_up_handler = bootstrap._set_up_signal_handler

    def with_watchdog(server) -> None:
        set_up_handler(server)
        for number in STOP_SIGNALS:
            streamlit_handler = signal.getsignal(number)

            def handler(signum, frame, inner=streamlit_handler):
                _arm_watchdog()
                if callable(inner):
                    inner(signum, frame)

            signal.signal(number, handler)

    bootstrap._set_up_signal_handler = with_watchdog


def main(argv: list[str]) -> None:
    """Run the dashboard with `argv` as `streamlit run` options (a leading script path is taken as the app)."""
    _bound_shutdown()
    from streamlit.web import cli

    script = argv[0] if argv and argv[0].endswith(".py") else APP
    options = argv[1:] if argv and argv[0].endswith(".py") else argv
    sys.argv = ["streamlit", "run", script, *options]
    cli.main()


if __name__ == "__main__":
    main(sys.argv[1:])
