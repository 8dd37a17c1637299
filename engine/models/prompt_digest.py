"""The digest of a prompt spec: what names a prompted language model's prompt in its metadata and in every key that
depends on it (a MaSF fit's, a planted model's truth), since the same model id can come to read another prompt."""
from __future__ import annotations

import hashlib


def prompt_sha256(spec) -> str | None:
    """16 hex digits of a prompt spec (`PromptSpec`: instruction, examples, verbalizer, replacement), hashed as the
    sorted items of its `to_dict()`; None for None (a model that reads no prompt)."""
    if spec is None:
        return None
    return hashlib.sha256(repr(sorted(spec.to_dict().items())).encode()).hexdigest()[:16]

