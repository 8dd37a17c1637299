"""The admin secret guards a server open to a network: one easy to guess is refused at start with the reason and
a command that makes a good one, and wrong secrets are slowed down server-wide (every session together), not only
per browser session, each logged."""
from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app import admin

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
SECRET = "correct horse battery staple"


def _check_serve(secret: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (admin.SECRET_ENV, admin.NETWORK_ENV)}
    env.update(PYTHONPATH=str(ROOT), **{admin.SECRET_ENV: secret})
    return subprocess.run([sys.executable, "-m", "app.admin", "check-serve", "--server.address", "0.0.0.0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("secret", "accepted"), [
    ("a" * 12, False),                   # one repeated letter, long enough
    ("abcabcabcabcabc", False),          # a short pattern repeated
    ("password1234", False),
    ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1", False),
    ("short", False),
    (SECRET, True),
    # what the message tells the user to run (one output of `secrets.token_urlsafe(24)`, written out: a parameter
    # drawn at collection would differ between pytest-xdist workers, which then refuse to run)
    ("khG3yeaJy9ZvtF2yUFzTzWpkVlnxqFLp", True),
])
def test_a_secret_easy_to_guess_is_refused_saying_why_and_how_to_make_one(secret, accepted):
    problem = admin.weak_secret_problem(secret)
    assert (problem is None) is accepted, (secret, problem)
    if not accepted:
        assert "secrets.token_urlsafe(24)" in problem and admin.SECRET_ENV in problem


def test_the_start_check_refuses_a_twelve_character_one_letter_secret():
    out = _check_serve("a" * 12)
    assert out.returncode == 2 and "too easy to guess" in out.stderr and "token_urlsafe" in out.stderr
    assert _check_serve(secrets.token_urlsafe(24)).returncode == 0


def test_the_server_wide_backoff_doubles_after_the_free_failures_and_forgets_after_a_right_secret(caplog):
    now = [0.0]
    backoff = admin.SignInBackoff(clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="app.admin"):
        pauses = [backoff.failed() for _ in range(admin.FREE_FAILURES + 4)]
    assert pauses == [0.0] * admin.FREE_FAILURES + [2.0, 4.0, 8.0, 16.0]
    assert backoff.wait_s() == 16.0
    assert sum("wrong secret" in r.getMessage() for r in caplog.records) == len(pauses), "each failure is logged"
    assert SECRET not in caplog.text
    now[0] += 16.0
    assert backoff.wait_s() == 0.0
    backoff.succeeded()
    assert backoff.failed() == 0.0, "a right secret resets the count"
    for _ in range(admin.FREE_FAILURES + 20):
        pause = backoff.failed()
    assert pause == admin.MAX_BACKOFF_S
    now[0] += admin.MAX_BACKOFF_S + admin.FAILURE_MEMORY_S + 1
    assert backoff.failed() == 0.0, "a quiet spell forgets the wrong secrets"


def _sign_in(at: AppTest, secret: str) -> AppTest:
    at.sidebar.text_input(key="admin_secret_input").input(secret)
    next(b for b in at.sidebar.button if b.label == "Sign in").click()
    at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_wrong_secrets_in_several_sessions_close_the_sign_in_for_every_session(monkeypatch, models_cache):
    """Guessing from many browser sessions is as slow as from one: after the free failures spread over two
    sessions, a third session with the right secret is told the sign-in is closed, and is not signed in."""
    monkeypatch.setenv(admin.NETWORK_ENV, "1")
    monkeypatch.setenv(admin.SECRET_ENV, SECRET)
    monkeypatch.setattr(admin, "FAILED_SIGN_IN_DELAY_S", 0.0)
    monkeypatch.setattr(admin, "BACKOFF", admin.SignInBackoff())
    sessions = [AppTest.from_file(MAIN, default_timeout=120) for _ in range(3)]
    for at in sessions:
        at.run(timeout=120)
    for i in range(admin.FREE_FAILURES + 1):
        _sign_in(sessions[i % 2], f"guess number {i}")
    third = _sign_in(sessions[2], SECRET)
    assert any("sign-in is closed for everyone" in e.value for e in third.sidebar.error)
    assert not any("Signed in" in c.value for c in third.sidebar.caption)
