"""Model ids: one namespace for checkpoints in models_cache and registered models.

Its own small module so that the registry and checkpoint modules both check ids without importing each other
(docs/architecture.md#layers).
"""
from __future__ import annotations

import re

from engine.errors import InvalidInputError

_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_model_id(model_id: str) -> str:
    """`model_id` unchanged when it is 1-128 letters, digits, '.', '_' or '-' (no slashes); else InvalidInputError."""
    # fullmatch: `re.match` with '$' lets a trailing newline through ('$' matches before a final '\n').
    if not isinstance(model_id, str) or not _ID_PATTERN.fullmatch(model_id):
        raise InvalidInputError(f"model id {model_id!r} must be 1-128 letters, digits, '.', '_' or '-' (no slashes)")
    return model_id
