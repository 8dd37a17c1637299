"""Uploaded data files (the Data page): stored by content under `user_dir()/uploads/` so that the same bytes land
on the same path and a registered upload is never overwritten. Which uploads a registration still uses is
`engine.data.user_registry`'s to say (it owns the registrations)."""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

from engine.errors import DataFileError
from engine.settings import user_dir

UPLOAD_SUFFIXES = (".csv", ".tsv", ".tab", ".jsonl", ".ndjson", ".json", ".parquet", ".pq")
_UPLOAD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ ()+-]{0,127}")


def uploads_dir() -> Path:
    return user_dir() / "uploads"


def check_upload_name(filename: str) -> str:
    """The uploaded file's own name, refused unless it is a plain name with a data-file suffix."""
    if (not isinstance(filename, str) or "/" in filename or "\\" in filename or filename in (".", "..")
            or not _UPLOAD_NAME.fullmatch(filename)):
        raise DataFileError(f"upload name {filename!r} is not allowed: use a plain file name of letters, digits, "
                            "spaces and . _ - ( ) +, without folders")
    if not filename.lower().endswith(UPLOAD_SUFFIXES):
        raise DataFileError(f"upload {filename!r}: use one of {', '.join(UPLOAD_SUFFIXES)}")
    return filename


def save_upload(filename: str, data) -> Path:
    """Save uploaded bytes (or a binary file object) under `uploads_dir()` as `<sha256[:16]>-<filename>`;
    the same content lands on the same path, so a registered upload is never overwritten. Returns the path."""
    filename = check_upload_name(filename)
    folder = uploads_dir()
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=".upload.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            if isinstance(data, (bytes, bytearray, memoryview)):
                digest.update(data)
                out.write(data)
            else:
                while block := data.read(1 << 20):
                    digest.update(block)
                    out.write(block)
        target = folder / f"{digest.hexdigest()[:16]}-{filename}"
        if target.resolve().parent != folder.resolve():
            raise DataFileError(f"upload {filename!r} would land outside {folder}")
        if target.exists():
            Path(tmp).unlink()
        else:
            os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target

