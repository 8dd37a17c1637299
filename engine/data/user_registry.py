"""The user's registered datasets: one JSON manifest per name under `user_dir()/datasets/`, written only after
`engine.data.user_validation` has passed the whole file; loading re-checks the file and rebuilds the splits.
Also which uploads (`engine.data.user_uploads`) a registration still uses.

The rules are listed in `engine.data.user` (and, for users, docs/own-data.md).
"""
from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path

import numpy as np

from engine.atomic import write_text
from engine.data import files
from engine.data.metrics import score
from engine.data.packaged import PACKAGED_DATASETS
from engine.data.splits import CARVE_FRACTION, carve, carved_size, stratified_sizes, stratified_split
from engine.data.types import SPLITS, Dataset, Example
from engine.data.user_uploads import uploads_dir
from engine.data.user_validation import (
    METRIC_CHOICES,
    ColumnChoice,
    RowProblems,
    check_columns,
    choose_metric,
    order_classes,
    scan_file,
    suggest_max_length,
)
from engine.errors import DataFileError, UnknownDatasetError
from engine.settings import user_dir

MANIFEST_VERSION = 1
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


# -- where registrations live -------------------------------------------------------------------------

def datasets_dir() -> Path:
    return user_dir() / "datasets"


def check_dataset_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise DataFileError(f"dataset name {name!r} is not allowed: use 1-64 lower-case letters, digits, '.', '_' or '-', "
                            "starting with a letter or digit")
    if name in PACKAGED_DATASETS:
        raise DataFileError(f"{name!r} is a packaged dataset; choose another name (packaged: {', '.join(PACKAGED_DATASETS)})")
    return name


def manifest_path(name: str) -> Path:
    return datasets_dir() / f"{check_dataset_name(name)}.json"


def read_manifest(name: str) -> dict:
    path = datasets_dir() / f"{name}.json"
    if not NAME_PATTERN.fullmatch(name or "") or not path.is_file():
        known = PACKAGED_DATASETS + tuple(user_dataset_names())
        raise UnknownDatasetError(f"unknown dataset {name!r}; known datasets: {', '.join(known)}. Register a "
                                  "file with `python -m engine datasets add NAME --file FILE --text-column C --label-column L`")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataFileError(f"the registration of {name!r} ({path}) cannot be read: {err}; register the file again "
                            "with --overwrite or remove it with `python -m engine datasets remove NAME`") from None
    if not isinstance(manifest, dict) or manifest.get("manifest_version") != MANIFEST_VERSION:
        raise DataFileError(f"the registration of {name!r} ({path}) is not a version-{MANIFEST_VERSION} manifest; register the file again")
    return manifest


def list_user_datasets() -> list[dict]:
    """Every registration (sorted by name), each with `state`: 'ok', 'missing' or 'modified' (by size and
    time only: a listing hashes nothing), or with `error` when its manifest cannot be read."""
    folder = datasets_dir()
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if not NAME_PATTERN.fullmatch(path.stem):
            # a file the engine did not write (no registration has such a name); reading it would report it as
            # unknown, listing the known names, which lists this folder again: endless
            out.append({"name": path.stem, "error": f"{path} is not a registration (not an allowed dataset name); "
                                                     "remove or rename it"})
            continue
        try:
            manifest = read_manifest(path.stem)
        except (DataFileError, UnknownDatasetError) as err:
            out.append({"name": path.stem, "error": str(err)})
            continue
        out.append({**manifest, "state": source_state(manifest)})
    return out


def user_dataset_names() -> list[str]:
    return [m["name"] for m in list_user_datasets() if "error" not in m]


def source_state(manifest: Mapping) -> str:
    path = Path(manifest["path"])
    try:
        now = files.fingerprint(path, manifest["format"], with_hash=False)
    except (DataFileError, OSError):
        return "missing"
    return "ok" if (now["size"], now["mtime_ns"]) == (manifest["size"], manifest["mtime_ns"]) else "modified"


def remove_user_dataset(name: str) -> Path:
    """Delete a registration (the user's file stays; an upload that no other registration uses goes)."""
    manifest = read_manifest(name)
    path = datasets_dir() / f"{name}.json"
    path.unlink()
    source = Path(manifest["path"])
    if source.is_relative_to(uploads_dir().resolve()) and not any(m.get("path") == manifest["path"] for m in list_user_datasets()):
        source.unlink(missing_ok=True)
    _CACHE.clear()
    return path



def split_class_counts(manifest: Mapping) -> dict[str, dict[str, int]]:
    """Rows of each class in each split, from the registered counts alone (no file read): the same
    arithmetic as `stratified_split` and `carve` use, so it matches what loading gives for any seed."""
    classes = manifest["classes"]
    out = {s: dict.fromkeys(classes, 0) for s in SPLITS}
    if manifest["split_source"] == "stratified":
        for c in classes:
            out["train"][c], out["validation"][c], out["test"][c] = stratified_sizes(manifest["class_counts"].get(c, 0))
        return out
    given = manifest["given_split_counts"]
    for s in SPLITS:
        for c in classes:
            out[s][c] = given.get(s, {}).get(c, 0)
    for s in manifest["carved_splits"]:  # test first, then validation, as `load_user_dataset` does
        for c in classes:
            moved = carved_size(out["train"][c])
            out["train"][c] -= moved
            out[s][c] = moved
    return out


def _check_splits(manifest: dict, path: Path) -> None:
    counts = split_class_counts(manifest)
    sizes = {s: sum(counts[s].values()) for s in SPLITS}
    for s in SPLITS:
        if sizes[s] == 0:
            raise DataFileError(f"{path}: the {s} split would be empty ({manifest['rows']:,} rows in all; split sizes "
                                f"{sizes}); add rows{' or give that split in the split column' if manifest['columns']['split'] else ''}")
    untrained = [c for c in manifest["classes"] if manifest["class_counts"].get(c) and not counts["train"][c]]
    if untrained:
        raise DataFileError(f"{path}: class(es) {', '.join(map(repr, untrained))} have no training row; a model cannot learn them")



def register_dataset(name: str, file: str | os.PathLike, text_column: str, label_column: str, *, pair_column: str | None = None,
                     split_column: str | None = None, rationale_column: str | None = None, rationale_unit: str = "char",
                     metric: str = "auto", overwrite: bool = False, command: str | None = None,
                     chunk_rows: int = files.DEFAULT_CHUNK_ROWS, progress: Callable[[int, int], None] | None = None,
                     should_stop: Callable[[], bool] | None = None) -> dict:
    """Validate `file` in chunks and write the manifest `user_dir()/datasets/<name>.json`; returns it.

    Refuses the whole file (DataFileError naming the file and the rows or columns) on any problem, and then
    writes nothing. progress(done_bytes, total_bytes) after each chunk; should_stop() polled between chunks.
    """
    code_version = _code_version()  # first: it may import torch, which is not the validation's time
    started = time.perf_counter()
    name = check_dataset_name(name)
    target = manifest_path(name)
    if target.exists() and not overwrite:
        raise DataFileError(f"a dataset named {name!r} is registered already ({target}); pass --overwrite or choose another name")
    path = Path(file).expanduser()
    fmt = files.detect_format(path)
    path = path.resolve()
    choice = ColumnChoice(text=text_column, label=label_column, pair=pair_column or None, split=split_column or None,
                          rationale=rationale_column or None, rationale_unit=rationale_unit)
    check_columns(path, fmt, choice)
    if metric not in METRIC_CHOICES:
        raise DataFileError(f"unknown metric {metric!r}; use one of {', '.join(METRIC_CHOICES)}")
    before = files.fingerprint(path, fmt)
    names = files.class_label_names(path, label_column) if fmt == "arrow" else None
    problems = RowProblems(path, "line" if fmt == "jsonl" else "row")
    scan = scan_file(path, fmt, choice, problems, names=names, chunk_rows=chunk_rows, progress=progress, should_stop=should_stop)
    problems.check("registered")
    if scan.rows == 0:
        raise DataFileError(f"{path} has no data rows; nothing was registered")
    present = [c for c in order_classes(scan.class_counts, names) if scan.class_counts.get(c)]
    if len(present) < 2:
        raise DataFileError(f"{path}: column {label_column!r} holds a single class ({present[0]!r} in all {scan.rows:,} rows); "
                            "a classifier needs at least two; nothing was registered")
    after = files.fingerprint(path, fmt, with_hash=False)
    if (after["size"], after["mtime_ns"]) != (before["size"], before["mtime_ns"]):
        raise DataFileError(f"{path} changed while it was being read; register it again once it is complete")

    by_folder = fmt == "arrow" and choice.split is None and files.arrow_folder_parts(path)[0][0] is not None
    classes = order_classes(scan.class_counts, names)
    chosen_metric, metric_reason = choose_metric({c: scan.class_counts.get(c, 0) for c in classes}, metric)
    max_length, max_length_rule = suggest_max_length(np.concatenate(scan.words))
    given = {}
    for (s, c), n in scan.split_class_counts.items():
        given.setdefault(s, {})[c] = n
    split_source = "column" if choice.split else "folders" if by_folder else "stratified"
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "name": name,
        "path": str(path),
        "format": fmt,
        **before,
        "columns": asdict(choice),
        "rows": scan.rows,
        "classes": classes,
        "class_counts": {c: scan.class_counts.get(c, 0) for c in classes},
        "class_first_row": {c: scan.first_row[c] for c in classes if c in scan.first_row},
        "row_unit": problems.unit,
        "split_source": split_source,
        "given_split_counts": given if split_source != "stratified" else None,
        # a split the data lack is carved from train: test first, then validation
        "carved_splits": [s for s in ("test", "validation") if split_source != "stratified" and not given.get(s)],
        "metric": chosen_metric,
        "metric_reason": metric_reason,
        "paired": bool(choice.pair),
        "max_length": max_length,
        "max_length_rule": max_length_rule,
        "rationale_rows": scan.rationales,
        "registered_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command,
        "code_version": code_version,
        "validation_seconds": round(time.perf_counter() - started, 3),
    }
    if split_source != "stratified" and not given.get("train"):
        where = f"column {split_column!r}" if split_column else "the split folders"
        raise DataFileError(f"{path}: no row is in the train split ({where} give: {', '.join(sorted(given)) or 'nothing'}); nothing was registered")
    _check_splits(manifest, path)
    manifest["split_sizes"] = {s: sum(v.values()) for s, v in split_class_counts(manifest).items()}
    _write_atomically(target, manifest)
    _CACHE.clear()
    return manifest


def _code_version() -> str:
    from engine.runtime import code_version

    return code_version()


def _write_atomically(target: Path, manifest: dict) -> None:
    """Write to a temporary file beside the target, then rename: a reader sees the old manifest or the
    new one, never a part."""
    write_text(target, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


# -- loading ----------------------------------------------------------------------------------------

def verify_source(manifest: Mapping) -> None:
    """Refuse a registered file that is gone or changed (size or time differ and the SHA-256 confirms it)."""
    path = Path(manifest["path"])
    again = (f"register it again with `python -m engine datasets add {manifest['name']} --file {path} ... --overwrite`"
             + (f" (it was: {manifest['command']})" if manifest.get("command") else ""))
    try:
        now = files.fingerprint(path, manifest["format"], with_hash=False)
    except (DataFileError, OSError) as err:
        raise DataFileError(f"the file of dataset {manifest['name']!r} cannot be found or read ({err}); {again}, "
                            f"or remove it with `python -m engine datasets remove {manifest['name']}`") from None
    if (now["size"], now["mtime_ns"]) == (manifest["size"], manifest["mtime_ns"]):
        return
    if files.fingerprint(path, manifest["format"])["sha256"] != manifest["sha256"]:
        raise DataFileError(f"{path} changed since it was registered as {manifest['name']!r} on {manifest['registered_at']} "
                            f"(size {manifest['size']:,} -> {now['size']:,} bytes; SHA-256 differs); {again}")


def load_user_dataset(name: str, split_seed: int = 0, chunk_rows: int = files.DEFAULT_CHUNK_ROWS) -> Dataset:
    """The registered dataset with its splits (uncached; `get_dataset` caches). Its texts are loaded
    into memory: a dataset used for training must fit there anyway."""
    manifest = read_manifest(name)
    verify_source(manifest)
    path = Path(manifest["path"])
    choice = ColumnChoice(**manifest["columns"])
    problems = RowProblems(path, manifest.get("row_unit", "row"))
    names = files.class_label_names(path, choice.label) if manifest["format"] == "arrow" else None
    scan = scan_file(path, manifest["format"], choice, problems, names=names, collect=True, chunk_rows=chunk_rows)
    problems.check("loaded")
    index = {c: i for i, c in enumerate(manifest["classes"])}
    by_split: dict[str | None, list[Example]] = {}
    for row, split, text, label, pair, spans in scan.examples:
        if label not in index:
            raise DataFileError(f"{path}: {manifest['row_unit']} {row} has label {label!r}, not one of the registered classes; "
                                "the file changed: register it again")
        by_split.setdefault(split, []).append(
            Example(primary=text, label=index[label], auxiliary=pair, rationale_spans=spans, uid=f"{name}:{row}"))
    if manifest["split_source"] == "stratified":
        splits = stratified_split(by_split.get(None, []), split_seed)
    else:
        splits = {s: by_split.get(s, []) for s in SPLITS}
        for k, s in enumerate(manifest["carved_splits"]):
            splits["train"], splits[s] = carve(splits["train"], seed=[split_seed, k], fraction=CARVE_FRACTION)
    columns = ", ".join(f"{role}={column!r}" for role, column in choice.roles().items())
    split_rule = {"stratified": "seeded stratified 80/10/10 split",
                  "column": f"splits from column {choice.split!r}",
                  "folders": "splits from the DatasetDict's folders"}[manifest["split_source"]]
    if manifest["carved_splits"]:
        split_rule += f" ({' and '.join(manifest['carved_splits'])} carved from train, {CARVE_FRACTION:.0%} of each class)"
    return Dataset(
        name=name,
        classes=tuple(manifest["classes"]),
        metric=manifest["metric"],
        splits=splits,
        split_seed=split_seed,
        description=f"Registered from {path} ({manifest['format']}, {manifest['rows']:,} rows; {columns}); {split_rule}; "
        f"metric {manifest['metric']} ({manifest['metric_reason']}).",
        paired=bool(manifest["paired"]),
        max_length=int(manifest["max_length"]),
        extra={"user": True, "path": str(path), "sha256": manifest["sha256"], "format": manifest["format"],
               "columns": manifest["columns"], "class_first_row": manifest["class_first_row"], "row_unit": manifest["row_unit"]},
    )


_CACHE: OrderedDict = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 4  # user datasets can be large: keep few


def get_user_dataset(name: str, split_seed: int = 0) -> Dataset:
    """`load_user_dataset`, cached while the manifest and the file keep their size and modification time."""
    manifest = read_manifest(name)
    try:
        now = files.fingerprint(Path(manifest["path"]), manifest["format"], with_hash=False)
    except (DataFileError, OSError):
        now = None
    key = (name, split_seed, (datasets_dir() / f"{name}.json").stat().st_mtime_ns, str(user_dir()),
           None if now is None else (now["size"], now["mtime_ns"]))
    with _CACHE_LOCK:
        if key in _CACHE and now is not None:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    dataset = load_user_dataset(name, split_seed)
    with _CACHE_LOCK:
        _CACHE[key] = dataset
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return dataset


def summary_from_manifest(manifest: Mapping, split_seed: int = 0) -> dict:
    """What `Dataset.summary()` gives, from the registered counts alone (nothing read)."""
    counts = split_class_counts(manifest)
    classes = list(manifest["classes"])
    train = counts["train"]
    majority = min(range(len(classes)), key=lambda i: (-train[classes[i]], i))
    y_test = np.repeat(np.arange(len(classes)), [counts["test"][c] for c in classes])
    baseline = score(manifest["metric"], y_test, np.full_like(y_test, majority), len(classes)) if y_test.size else math.nan
    return {
        "name": manifest["name"], "classes": classes, "metric": manifest["metric"], "paired": bool(manifest["paired"]),
        "sizes": {s: sum(counts[s].values()) for s in SPLITS}, "split_seed": split_seed,
        "majority_class": classes[majority], "majority_baseline_test": baseline, "max_length": manifest["max_length"],
    }



def is_registered_file(path: Path) -> bool:
    path = str(Path(path).resolve())
    return any(m.get("path") == path for m in list_user_datasets())


def prune_uploads(older_than_s: float = 24 * 3600) -> list[Path]:
    """Delete uploads that no registration uses and that are older than `older_than_s` (a preview that was
    never registered); returns what went."""
    folder = uploads_dir()
    if not folder.is_dir():
        return []
    used = {m.get("path") for m in list_user_datasets()}
    gone = []
    for path in folder.iterdir():
        if path.is_file() and str(path.resolve()) not in used and time.time() - path.stat().st_mtime > older_than_s:
            path.unlink(missing_ok=True)
            gone.append(path)
    return gone



def suggest_dataset_name(filename: str) -> str:
    """A valid dataset name from a file name ('My Reviews (2).csv' -> 'my-reviews-2'), not yet registered."""
    stem = Path(filename).stem.lower()
    name = re.sub(r"[^a-z0-9._-]+", "-", stem).strip("-._")[:56] or "my-data"
    taken = set(user_dataset_names()) | set(PACKAGED_DATASETS)
    candidate, k = name, 2
    while candidate in taken:
        candidate, k = f"{name}-{k}", k + 1
    return candidate
