"""Invitation tokens for plausibility studies: made unguessable, stored only as a hash, compared in
constant time, and turned into links.

A token is `secrets.token_urlsafe(24)`: 192 random bits, so a plain SHA-256 is enough to store it (no
salt or slow hash is needed against guessing: there is nothing to brute-force in a 192-bit space, and a
leaked database does not give anyone a working link). The raw token exists only in the value returned
when it is made (printed once by `study invite`) and in the link the annotator holds.

Links: a personal link is `BASE/?study_token=TOKEN`; the open (crowd) link is
`BASE/?study_token=TOKEN&PROLIFIC_PID={{%PROLIFIC_PID%}}`, where the recruiting platform fills the worker
id (the parameter's name is the study's `worker_param`).
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlencode

TOKEN_PARAM = "study_token"
TOKEN_BYTES = 24
DEFAULT_BASE_URL = "http://localhost:8501/"


def new_token() -> str:
    """A fresh URL-safe token (32 characters, 192 random bits)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(token: str) -> str:
    """The SHA-256 hex digest the database keeps instead of the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_matches(token: str, stored_hash: str) -> bool:
    """Whether `token` hashes to `stored_hash`, compared in constant time (`hmac.compare_digest`)."""
    return hmac.compare_digest(hash_token(token), stored_hash)


def new_completion_code() -> str:
    """A completion code for crowd workers: 8 upper-case hex characters (what Prolific-style platforms take)."""
    return secrets.token_hex(4).upper()


def invitation_url(token: str, base_url: str = DEFAULT_BASE_URL, worker_param: str | None = None) -> str:
    """The link an annotator opens. `worker_param` (open links only) adds `&PARAM={{%PARAM%}}`, the
    placeholder Prolific replaces with the worker's id (other platforms: replace it with theirs)."""
    base = base_url if base_url.endswith("/") or "?" in base_url else base_url + "/"
    joiner = "&" if "?" in base else "?"
    url = base + joiner + urlencode({TOKEN_PARAM: token})
    if worker_param:
        url += f"&{worker_param}={{{{%{worker_param}%}}}}"
    return url
