"""Which shipped results each docs table reads, and which of them name no known code.

A table is only as reproducible as the code that computed what it reads. `read_files` builds a table while an audit
hook (`sys.addaudithook`) records every file opened and every folder listed under the results root; `provenance_files`
turns those reads into the JSON / JSONL files that carry the provenance of what was read (a listed folder: the ones
in it, as a store reads every cell of a run; a parquet or CSV file: its `.json` beside it, else the ones in its
folder). `unknown_code` says why a file's code is unknown: it records no `*code_version` at all, or one with
"-dirty" (uncommitted code; a note beside it, as `scripts/archive/relabel_dirty_provenance.py` writes when git history
cannot show the code was committed, labels it but does not make it known). A checkpoint's code version counts as
the result's: weights made by unknown code make the result's numbers unknown too.
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.runtime import DIRTY_MARK

PROVENANCE_SUFFIXES = (".json", ".jsonl")
SKIPPED = ("published",)  # numbers copied from papers: no code of ours made them
_EVENTS = ("open", "os.listdir", "os.scandir", "glob.glob")
_recorders: list[set[Path]] = []  # the reads of each `recording()` in progress, innermost last
_hooked = False


def _hook(event: str, args: tuple) -> None:
    if not _recorders or event not in _EVENTS or not args:
        return
    target = args[0]
    if isinstance(target, bytes):
        target = os.fsdecode(target)
    if isinstance(target, (str, os.PathLike)):
        path = Path(target)
        if event == "glob.glob":
            path = path.parent  # a pattern: the folder it lists
        for reads in _recorders:
            reads.add(path)


@contextmanager
def recording() -> Iterator[set[Path]]:
    """Collect every path opened or listed (as given, not resolved) while the block runs."""
    global _hooked
    if not _hooked:  # an audit hook cannot be removed: one for the process, idle outside `recording`
        sys.addaudithook(_hook)
        _hooked = True
    reads: set[Path] = set()
    _recorders.append(reads)
    try:
        yield reads
    finally:
        del _recorders[next(i for i, r in enumerate(_recorders) if r is reads)]  # by identity: equal sets abound


def replayed_cache(function: Callable) -> Callable:
    """`functools.cache` for a function of hashable arguments that also records its reads: a call answered from the
    cache adds what the first call read to every `recording()` in progress, so a table that reuses another's
    frames still counts their files."""
    memo: dict = {}

    def cached(*args):
        if args not in memo:
            with recording() as reads:
                memo[args] = (function(*args), frozenset(reads))
        else:
            for active in _recorders:
                active |= memo[args][1]
        return memo[args][0]

    cached.cache_clear = memo.clear
    cached.__doc__, cached.__name__, cached.__wrapped__ = function.__doc__, function.__name__, function
    return cached


def read_files(build: Callable[[Path], str], root: Path) -> set[Path]:
    """The provenance files under `root` that `build(root)` reads (see the module's docstring)."""
    with recording() as reads:
        build(root)
    return provenance_files(reads, root)


def _inside(path: Path, root: Path) -> Path | None:
    try:
        resolved = path.resolve()
        relative = resolved.relative_to(root)
    except (ValueError, OSError):
        return None
    return None if relative.parts and relative.parts[0] in SKIPPED else resolved


def _in_folder(folder: Path) -> set[Path]:
    return {p for p in folder.iterdir() if p.is_file() and p.suffix in PROVENANCE_SUFFIXES}


def provenance_files(reads: set[Path], root: Path) -> set[Path]:
    """The JSON / JSONL files under `root` holding the provenance of the paths read."""
    root = Path(root).resolve()
    found: set[Path] = set()
    for read in reads:
        path = _inside(read, root)
        if path is None or not path.exists():
            continue
        if path.is_dir():
            found |= _in_folder(path)
        elif path.suffix in PROVENANCE_SUFFIXES:
            found.add(path)
        elif path.with_suffix(".json").is_file():
            found.add(path.with_suffix(".json"))
        else:
            found |= _in_folder(path.parent)
    return found


def _versions(obj, where: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(value, str) and key.endswith("code_version"):
                yield ".".join((*where, key)), value
            else:
                yield from _versions(value, (*where, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _versions(value, (*where, str(i)))


def unknown_code(path: Path) -> str | None:
    """Why the code of the result in `path` (JSON, or JSONL: one record a line) is unknown, or None when every record
    names committed code."""
    text = path.read_text(encoding="utf-8")
    try:
        records = ([json.loads(line) for line in text.splitlines() if line.strip()] if path.suffix == ".jsonl"
                   else [json.loads(text)])
    except ValueError:
        return "not valid JSON: its provenance cannot be read"
    dirty: dict[str, str] = {}
    for i, record in enumerate(records):
        versions = list(_versions(record))
        if not versions:
            return "records no code version" + (f" (line {i + 1})" if path.suffix == ".jsonl" else "")
        for where, version in versions:
            if DIRTY_MARK in version:
                dirty.setdefault(where, version)
    if dirty:
        return "uncommitted code: " + ", ".join(f"{where} = {version}" for where, version in sorted(dirty.items()))
    return None
