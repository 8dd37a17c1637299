"""Who may change the server: on loopback (the default bind) the one user is the admin, as before; served to a
network, the pages and actions that change the server (Models, Your data, compute cells, studies) need the
admin secret.

Served to a network means: Streamlit's `server.address` is not a loopback address (`bash scripts/start.sh
--server.address 0.0.0.0`; an empty address is every interface), or `ENGINE_NETWORK=1` (a reverse proxy on the
same machine forwards to a loopback bind, so the bind alone cannot tell). The secret is `ENGINE_ADMIN_SECRET`
or `admin_secret` in `.streamlit/secrets.toml`; a server open to a network without one refuses to start
(`python -m app.admin check-serve ARGS`, run by scripts/start.sh) and, started some other way, serves nothing.

A session signs in once (the sidebar's Admin box); a full page reload is a new session and signs in again.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import math
import sys
import threading
import time
from collections import Counter

import streamlit as st

from engine.settings import admin_secret_request, network_request

SECRET_ENV = "ENGINE_ADMIN_SECRET"  # read by engine.settings, as every ENGINE_* variable
NETWORK_ENV = "ENGINE_NETWORK"
SECRET_NAME = "admin_secret"  # its key in .streamlit/secrets.toml
SESSION_KEY = "admin_signed_in"  # the SHA-256 of the secret the session signed in with
MIN_SECRET_LENGTH = 12
MIN_SECRET_BITS = 60.0  # estimated entropy (secret_bits): a repeated letter or a short pattern has far less
MAKE_SECRET = 'python -c "import secrets; print(secrets.token_urlsafe(24))"'  # 32 characters, about 190 bits
FAILED_SIGN_IN_DELAY_S = 1.0  # a wrong secret costs its session a second: guessing through one form is slow
# Server-wide, whatever the session: after FREE_FAILURES wrong secrets, each further one closes the sign-in of every
# session for twice as long as the last (from 2 s, at most MAX_BACKOFF_S); a right one or FAILURE_MEMORY_S without a
# wrong one forgets them. Many sessions guessing at once are then as slow as one.
FREE_FAILURES = 3
MAX_BACKOFF_S = 300.0
FAILURE_MEMORY_S = 900.0
LOG = logging.getLogger("app.admin")


class AdminRequired(PermissionError):
    """An action that changes the server was asked for by a session that is not the admin."""


def is_loopback(address: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`; False for an empty address (Streamlit binds every interface)."""
    if not address:
        return False
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything, so it counts as a network


def served_to_network(address: str | None = None) -> bool:
    """Whether visitors may come from other machines: `ENGINE_NETWORK=1`, or a bind `address` (by default
    Streamlit's `server.address` option) that is not loopback."""
    if network_request():
        return True
    if address is None:
        address = st.get_option("server.address")
    return not is_loopback(address)


def admin_secret() -> str | None:
    """The admin secret: `ENGINE_ADMIN_SECRET`, else `admin_secret` in Streamlit's secrets files
    (`.streamlit/secrets.toml` of the working directory or the home folder); None when neither is set or it is
    blank."""
    value = admin_secret_request()
    if value is None:
        try:
            value = st.secrets.get(SECRET_NAME)
        except Exception:  # no secrets file, or one that does not parse: no secret (a network server then refuses)
            value = None
    return str(value) if value is not None and str(value).strip() else None


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


def secret_matches(given: str | None, secret: str | None = None) -> bool:
    """Constant-time comparison of `given` with the admin secret (digests of equal length, compared with
    hmac.compare_digest, so neither the content nor the length leaks through timing)."""
    secret = admin_secret() if secret is None else secret
    if not secret or given is None:
        return False
    return hmac.compare_digest(_digest(given), _digest(secret))


def is_admin() -> bool:
    """On loopback: always. Served to a network: only a session signed in with the current secret."""
    if not served_to_network():
        return True
    secret = admin_secret()
    signed = st.session_state.get(SESSION_KEY)
    return bool(secret) and isinstance(signed, bytes) and hmac.compare_digest(signed, _digest(secret))


class SignInBackoff:
    """Wrong secrets counted over the whole server (every session of this process): past FREE_FAILURES, each one
    closes the sign-in for a doubling pause, logged with the count; a right secret or a quiet FAILURE_MEMORY_S
    resets it. `clock` is injectable for tests."""

    def __init__(self, clock=time.monotonic) -> None:
        self._lock = threading.Lock()
        self.clock = clock
        self.failures = 0
        self.last_failure = -math.inf
        self.closed_until = -math.inf

    def wait_s(self) -> float:
        """Seconds until the next attempt is taken (0: now)."""
        with self._lock:
            return max(0.0, self.closed_until - self.clock())

    def failed(self) -> float:
        """Record a wrong secret; the pause it starts, in seconds."""
        with self._lock:
            now = self.clock()
            if now - self.last_failure > FAILURE_MEMORY_S:
                self.failures = 0
            self.failures += 1
            self.last_failure = now
            extra = self.failures - FREE_FAILURES
            pause = 0.0 if extra <= 0 else min(MAX_BACKOFF_S, 2.0 ** extra)
            self.closed_until = now + pause
            LOG.warning("admin sign-in: wrong secret (%d in a row on this server); sign-in closed for %.0f s",
                        self.failures, pause)
            return pause

    def succeeded(self) -> None:
        with self._lock:
            if self.failures:
                LOG.warning("admin sign-in: right secret after %d wrong ones", self.failures)
            self.failures = 0
            self.closed_until = -math.inf


BACKOFF = SignInBackoff()


class SignInClosed(PermissionError):
    """Sign-in is paused server-wide after too many wrong secrets; the message says for how long."""


def sign_in(given: str) -> bool:
    """Sign this session in if `given` is the secret; a wrong one waits FAILED_SIGN_IN_DELAY_S and counts towards
    the server-wide pause (SignInBackoff). While the pause lasts, no secret is even compared: SignInClosed."""
    wait = BACKOFF.wait_s()
    if wait > 0:
        raise SignInClosed(f"Too many wrong secrets on this server: sign-in is closed for everyone for another "
                           f"{math.ceil(wait)} s. Try again then.")
    if secret_matches(given):
        BACKOFF.succeeded()
        st.session_state[SESSION_KEY] = _digest(admin_secret())
        return True
    BACKOFF.failed()
    time.sleep(FAILED_SIGN_IN_DELAY_S)
    return False


def sign_out() -> None:
    st.session_state.pop(SESSION_KEY, None)


def require_admin() -> None:
    """At the top of a page that changes the server: a non-admin session sees a refusal and nothing else."""
    if not is_admin():
        st.error("This page changes the server: sign in as the admin (sidebar, Admin) to use it.",
                 icon=":material/lock:")
        st.stop()


def ensure_admin(action: str) -> None:
    """Inside an action that changes the server (checked where it runs, not only in the menu): raises
    AdminRequired for a non-admin session."""
    if not is_admin():
        raise AdminRequired(f"{action} needs the admin: sign in with the admin secret")


def sign_in_box() -> None:
    """The sidebar's Admin box, shown only when served to a network."""
    if not served_to_network():
        return
    with st.sidebar.expander("Admin", icon=":material/lock:", expanded=False):
        if is_admin():
            st.caption("Signed in as the admin.")
            if st.button("Sign out", key="admin_sign_out"):
                sign_out()
                st.rerun()
            return
        with st.form("admin_sign_in", clear_on_submit=True):
            given = st.text_input("Admin secret", type="password", key="admin_secret_input")
            if st.form_submit_button("Sign in"):
                try:
                    if sign_in(given):
                        st.rerun()
                    st.error("Wrong secret.")
                except SignInClosed as err:
                    st.error(str(err))


def open_without_secret_message(address: str | None) -> str:
    where = f"address {address!r}" if address else "every interface"
    return (f"Refusing to serve the dashboard to a network ({where}"
            f"{', ENGINE_NETWORK=1' if network_request() else ''}) without an admin secret: "
            f"anyone reaching it could register server folders, train, upload and run studies. Set "
            f"{SECRET_ENV} (at least {MIN_SECRET_LENGTH} characters, not easy to guess: `{MAKE_SECRET}` makes one) "
            f"or `{SECRET_NAME} = \"...\"` in .streamlit/secrets.toml, or serve on 127.0.0.1 (the default) and "
            f"forward the port over SSH.")


def secret_bits(secret: str) -> float:
    """An estimate of the secret's entropy in bits: its length times the Shannon entropy of its own characters'
    frequencies. A repeated letter is 0, `abcabcabcabc` 19; a random 32-character token_urlsafe about 150. It
    catches repeats and short patterns, not a dictionary phrase: a secret made by `secrets` is the safe choice."""
    counts = Counter(secret)
    n = len(secret)
    return max(0.0, -sum(c * math.log2(c / n) for c in counts.values()))


def weak_secret_problem(secret: str) -> str | None:
    """Why `secret` is too weak to guard a server open to a network (too short or too little entropy), or None."""
    how = f"Make one with `{MAKE_SECRET}` and set it as {SECRET_ENV} or `{SECRET_NAME}` in .streamlit/secrets.toml."
    if len(secret) < MIN_SECRET_LENGTH:
        return (f"The admin secret is {len(secret)} characters long; a server open to a network needs at least "
                f"{MIN_SECRET_LENGTH}. {how}")
    bits = secret_bits(secret)
    if bits < MIN_SECRET_BITS:
        return (f"The admin secret is too easy to guess: about {bits:.0f} bits of entropy by its characters "
                f"(repeated or few distinct characters), and a server open to a network needs {MIN_SECRET_BITS:.0f}. "
                f"{how}")
    return None


def serving_problem(address: str | None = None) -> str | None:
    """Why this server must not serve (open to a network with no secret, or a weak one), or None."""
    if not served_to_network(address):
        return None
    secret = admin_secret()
    if secret is None:
        return open_without_secret_message(st.get_option("server.address") if address is None else address)
    return weak_secret_problem(secret)


def address_from_args(args: list[str]) -> str | None:
    """The bind address `streamlit run` will use given its arguments: the last `--server.address X` (or
    `--server.address=X`), else `STREAMLIT_SERVER_ADDRESS`, else the config files of the working directory."""
    found = None
    for i, arg in enumerate(args):
        if arg == "--server.address" and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith("--server.address="):
            found = arg.split("=", 1)[1]
    if found is not None:
        return found
    from streamlit import config

    config.get_config_options(force_reparse=True)  # reads STREAMLIT_* variables and .streamlit/config.toml
    return config.get_option("server.address")


def main(argv: list[str]) -> int:
    """`python -m app.admin check-serve [streamlit run arguments]`: exit 2 with the reason when the server
    would be open to a network without a (long enough) admin secret, else 0."""
    if not argv or argv[0] != "check-serve":
        print("usage: python -m app.admin check-serve [--server.address ADDRESS ...]", file=sys.stderr)
        return 64
    problem = serving_problem(address_from_args(argv[1:]))
    if problem:
        print(problem, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
