"""The user's own datasets: a file registered by reference, validated in chunks, then found by name.

A registration is one small JSON manifest, `user_dir()/datasets/<name>.json`: the file's absolute path,
size, modification time and SHA-256, the chosen columns, and what the validation pass learnt (classes and
their counts, split sizes, metric, max length). The data are not copied. Loading re-checks the file: a size
or time that differs is confirmed with the SHA-256, and a changed file is refused with a message saying how
to register it again.

Rules (docs/own-data.md states them for users):
- Rows: every row needs a non-blank text (and second text, when a pair column is given) and a label; any
  bad row refuses the whole file, with the rows named. Nothing is written until every check has passed.
- Labels: text or whole numbers (JSON/Parquet ints, floats that are whole, or digits in a CSV). Classes are
  sorted by number when every label is a whole number, else alphabetically; a `datasets` ClassLabel column
  keeps its own names and order. At least two classes; at most `MAX_CLASSES`.
- Splits: from the split column (train; validation, val, valid, dev; test; any case) or a DatasetDict's
  split folders; a split that the data lack is carved from train (`CARVE_FRACTION` of each class, seeded
  by the split seed). Without a split column: seeded stratified 80/10/10 (`engine.data.splits`).
- Metric: accuracy, or macro-F1 when the classes are imbalanced: the smallest class has fewer than
  `IMBALANCE_RATIO` times the rows of the largest (over the whole file).
- Rationales: a list of [start, end) pairs (or its JSON text) per row, in characters of the text or in its
  whitespace-separated words (`rationale_unit='token'`); they load as `Example.rationale_spans` (character
  spans), the ground truth of the plausibility metrics. A blank value means no rationale for that row.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from difflib import get_close_matches
from pathlib import Path

import numpy as np

from engine.atomic import write_text
from engine.data import files
from engine.data.labels import check_labels  # noqa: F401 (re-exported)
from engine.data.metrics import score
from engine.data.splits import CARVE_FRACTION, carve, carved_size, stratified_sizes, stratified_split
from engine.data.types import SPLITS, Dataset, Example
from engine.errors import Cancelled, DataFileError, UnknownDatasetError
from engine.settings import user_dir

MANIFEST_VERSION = 1
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
MAX_CLASSES = 1000
IMBALANCE_RATIO = 0.5
METRIC_CHOICES = ("auto", "accuracy", "macro_f1")
RATIONALE_UNITS = ("char", "token")
SPLIT_ALIASES = {
    "train": "train", "training": "train",
    "validation": "validation", "valid": "validation", "val": "validation", "dev": "validation", "development": "validation",
    "test": "test", "testing": "test",
}
#: max_length = tokens of the 95th-percentile input (about 1.5 word pieces per word, plus 3 special
#: tokens), rounded up to a multiple of 16, within these bounds
MAX_LENGTH_BOUNDS = (32, 512)
UPLOAD_SUFFIXES = (".csv", ".tsv", ".tab", ".jsonl", ".ndjson", ".json", ".parquet", ".pq")
_UPLOAD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ ()+-]{0,127}")
_SHOWN_ROWS = 5


@dataclass(frozen=True)
class ColumnChoice:
    """Which column plays which role. `pair`: the second text of a paired task (never masked);
    `rationale_unit`: 'char' or 'token' (whitespace-separated words of the text)."""

    text: str
    label: str
    pair: str | None = None
    split: str | None = None
    rationale: str | None = None
    rationale_unit: str = "char"

    def roles(self) -> dict[str, str]:
        return {role: column for role, column in (("text", self.text), ("label", self.label), ("pair", self.pair),
                                                    ("split", self.split), ("rationale", self.rationale)) if column}


# -- where registrations live -------------------------------------------------------------------------

def datasets_dir() -> Path:
    return user_dir() / "datasets"


def uploads_dir() -> Path:
    return user_dir() / "uploads"


def check_dataset_name(name: str) -> str:
    from engine.data import PACKAGED_DATASETS

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
        from engine.data import dataset_names

        raise UnknownDatasetError(f"unknown dataset {name!r}; known datasets: {', '.join(dataset_names())}. Register a "
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


# -- problems found while scanning ----------------------------------------------------------------------

class _Problems:
    """Bad rows by kind: how many and the first few row numbers, so one message lists them all."""

    def __init__(self, path: Path, unit: str):
        self.path, self.unit = path, unit
        self.kinds: dict[str, list] = {}

    def add(self, message: str, rows) -> None:
        rows = np.asarray(rows)
        if rows.size == 0:
            return
        entry = self.kinds.setdefault(message, [0, []])
        entry[0] += int(rows.size)
        entry[1].extend(int(r) for r in rows[: max(0, _SHOWN_ROWS - len(entry[1]))])

    def check(self, doing: str) -> None:
        if not self.kinds:
            return
        lines = []
        for message, (count, rows) in self.kinds.items():
            where = ", ".join(map(str, rows)) + (", ..." if count > len(rows) else "")
            plural = "s" if count != 1 else ""
            lines.append(f"{message}: {count} {self.unit}{plural} ({self.unit}{plural} {where})")
        raise DataFileError(f"{self.path} cannot be {doing}; nothing was {doing}:\n  " + "\n  ".join(lines))


# -- column checks on one chunk ----------------------------------------------------------------------

def _as_text(array, column: str, path: Path):
    import pyarrow as pa

    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_null(array.type) or pa.types.is_string(array.type):
        return array.cast(pa.string())
    if pa.types.is_large_string(array.type) or pa.types.is_integer(array.type) or pa.types.is_floating(array.type):
        return array.cast(pa.string())
    raise DataFileError(f"{path}: column {column!r} holds {array.type} values, not text")


def _blank(text) -> np.ndarray:
    import pyarrow.compute as pc

    return pc.fill_null(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(text)), 0), True).to_numpy(zero_copy_only=False)


def _labels_as_text(array, column: str, path: Path, names: Sequence[str] | None, rows: np.ndarray, problems: _Problems):
    """(labels as text, [N] bool: missing). Labels that are present but unusable (a fraction, a number outside
    a ClassLabel's names) are reported here and come back as null without counting as missing."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def mask(boolean_array) -> np.ndarray:
        return np.asarray(pc.fill_null(boolean_array, True).to_numpy(zero_copy_only=False), dtype=bool)

    t = array.type
    if pa.types.is_dictionary(t):
        array = array.dictionary_decode()
        t = array.type
    null = mask(array.is_null())
    if pa.types.is_null(t):
        return array.cast(pa.string()), null
    if names is not None and pa.types.is_integer(t):
        valid = pc.and_(pc.greater_equal(array, 0), pc.less(array, len(names)))
        problems.add(f"column {column!r} (label) holds a number outside its ClassLabel names 0..{len(names) - 1} "
                     "(-1 marks an unlabelled row in `datasets`)", rows[~mask(valid) & ~null])
        return pa.array(names, pa.string()).take(pc.if_else(valid, array, pa.scalar(None, t))), null
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return array.cast(pa.string()), null
    if pa.types.is_floating(t):
        missing = mask(pc.is_nan(array))  # pandas writes a missing number as NaN
        whole = pc.equal(pc.floor(array), array)
        problems.add(f"column {column!r} (label) holds a number that is not whole (labels must be class names or whole "
                     "numbers)", rows[~mask(whole) & ~missing])
        return pc.if_else(whole, array, pa.scalar(None, t)).cast(pa.int64()).cast(pa.string()), missing
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        text = pc.utf8_trim_whitespace(array.cast(pa.string()))
        blank = pc.equal(pc.utf8_length(text), 0)
        return pc.if_else(blank, pa.scalar(None, pa.string()), text), mask(blank)
    raise DataFileError(f"{path}: column {column!r} holds {t} values; labels must be text or whole numbers")


class _RationaleError(Exception):
    """A rationale value that cannot be used; the message is the kind of problem (rows are added by the caller)."""


def parse_rationale(value, text: str, unit: str = "char") -> tuple[tuple[int, int], ...]:
    """Character spans [start, end) of `text` from one rationale value: a list of [start, end) pairs (or its
    JSON text), counted in characters of `text` or, with unit 'token', in its whitespace-separated words
    (end exclusive). None, '' and [] mean no rationale. Spans are returned sorted; overlaps are kept."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise _RationaleError("is not a JSON list of [start, end] pairs") from None
    if not isinstance(value, list) or not all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in p) for p in value
    ):
        raise _RationaleError("is not a list of [start, end] pairs of whole numbers")
    if unit == "token":
        words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
        limit = len(words)
    else:
        limit = len(text)
    spans = []
    for start, end in value:
        if not 0 <= start < end <= limit:
            raise _RationaleError(f"has a span outside the text or empty (each [start, end) needs 0 <= start < end <= "
                                  f"the text's {'words' if unit == 'token' else 'characters'})")
        spans.append((words[start][0], words[end - 1][1]) if unit == "token" else (start, end))
    return tuple(sorted(spans))


# -- the scan ---------------------------------------------------------------------------------------

@dataclass
class _Scan:
    """What one pass learnt: counts always; the rows themselves only when loading (collect=True)."""

    rows: int = 0
    class_counts: Counter = field(default_factory=Counter)
    first_row: dict = field(default_factory=dict)  # class -> first row carrying it
    split_class_counts: Counter = field(default_factory=Counter)  # (split, class) -> rows
    words: list = field(default_factory=list)  # [chunk] int32 arrays of words per input
    rationales: int = 0
    examples: list | None = None  # (row, split or None, text, label text, pair, spans)


def _scan(path: Path, fmt: str, choice: ColumnChoice, problems: _Problems, *, names: Sequence[str] | None = None,
          collect: bool = False, chunk_rows: int = files.DEFAULT_CHUNK_ROWS,
          progress: Callable[[int, int], None] | None = None, should_stop: Callable[[], bool] | None = None) -> _Scan:
    """One pass over the file in chunks: every row checked, counts kept, texts kept only when `collect`."""
    import pyarrow.compute as pc

    scan = _Scan()
    if collect:
        scan.examples = []
    by_folder = fmt == "arrow" and choice.split is None and files.arrow_folder_parts(path)[0][0] is not None
    for chunk in files.read_chunks(path, list(dict.fromkeys(choice.roles().values())), fmt=fmt, chunk_rows=chunk_rows):
        if should_stop is not None and should_stop():
            raise Cancelled(f"reading {path} stopped; nothing was registered")
        rows = chunk.rows
        scan.rows += len(chunk)

        text = _as_text(chunk.columns[choice.text], choice.text, path)
        problems.add(f"column {choice.text!r} (text) is empty", rows[_blank(text)])
        words = pc.list_value_length(pc.utf8_split_whitespace(pc.fill_null(text, ""))).to_numpy(zero_copy_only=False)
        pair = None
        if choice.pair:
            pair = _as_text(chunk.columns[choice.pair], choice.pair, path)
            problems.add(f"column {choice.pair!r} (second text) is empty", rows[_blank(pair)])
            words = words + pc.list_value_length(pc.utf8_split_whitespace(pc.fill_null(pair, ""))).to_numpy(zero_copy_only=False)
        scan.words.append(np.asarray(words, dtype=np.int32))

        labels, missing = _labels_as_text(chunk.columns[choice.label], choice.label, path, names, rows, problems)
        problems.add(f"column {choice.label!r} (label) is empty", rows[missing])
        counts = pc.value_counts(labels.drop_null())
        for value, count in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()):
            if value not in scan.first_row:
                scan.first_row[value] = int(rows[pc.index(labels, value).as_py()])
            scan.class_counts[value] += count
        if len(scan.class_counts) > MAX_CLASSES:
            raise DataFileError(f"{path}: column {choice.label!r} has more than {MAX_CLASSES:,} distinct labels by "
                                f"{problems.unit} {int(rows[-1])}: is it the label column?")

        label_list = labels.to_pylist() if (collect or choice.split or by_folder) else None
        split_list = None
        if choice.split or by_folder:
            raw = chunk.columns[choice.split].to_pylist() if choice.split else chunk.split
            split_list = [SPLIT_ALIASES.get(str(v).strip().lower()) if v is not None else None for v in raw]
            bad = np.array([s is None for s in split_list])
            if choice.split:
                unknown = sorted({str(v) for v, s in zip(raw, split_list) if s is None and v is not None})
                for value in unknown[:3]:  # the first few values by name, any others together
                    problems.add(f"column {choice.split!r} (split) holds {value!r}, not train, validation (val, valid, dev) "
                                 "or test", rows[np.array([v is not None and str(v) == value for v in raw])])
                others = set(unknown[3:])
                problems.add(f"column {choice.split!r} (split) holds other values that are not train, validation or test",
                             rows[np.array([v is not None and str(v) in others for v in raw])])
                problems.add(f"column {choice.split!r} (split) is empty", rows[np.array([v is None for v in raw])])
            elif bad.any():
                folder = next(v for v, s in zip(raw, split_list) if s is None)
                raise DataFileError(f"{path}: the split folder {folder!r} is not train, validation or test; give a "
                                    "--split-column, or save only the usable splits")
            scan.split_class_counts.update((s, lab) for s, lab in zip(split_list, label_list) if s and lab is not None)

        spans_by_index: dict[int, tuple] = {}
        if choice.rationale:
            values = chunk.columns[choice.rationale].to_pylist()
            present = [i for i, v in enumerate(values) if v is not None and v != "" and v != []]
            texts = text.take(present).to_pylist() if present else []
            for i, t in zip(present, texts):
                try:
                    spans_by_index[i] = parse_rationale(values[i], t or "", choice.rationale_unit)
                except _RationaleError as err:
                    problems.add(f"column {choice.rationale!r} (rationale) {err}", [rows[i]])
            scan.rationales += sum(1 for s in spans_by_index.values() if s)

        if collect and not problems.kinds:
            texts = text.to_pylist()
            pairs = pair.to_pylist() if pair is not None else [None] * len(texts)
            for i, (row, t, lab, p) in enumerate(zip(rows.tolist(), texts, label_list, pairs)):
                scan.examples.append((row, split_list[i] if split_list else None, t, lab, p, spans_by_index.get(i, ())))
        if progress is not None:
            progress(chunk.done, chunk.total)
    return scan


# -- what the counts decide -------------------------------------------------------------------------

def order_classes(labels: Iterable[str], names: Sequence[str] | None = None) -> list[str]:
    """Class order: a ClassLabel's own names; by number when every label is a whole number; else alphabetical."""
    if names is not None:
        return list(names)
    labels = list(labels)
    if labels and all(re.fullmatch(r"-?\d+", s) for s in labels):
        return sorted(labels, key=int)
    return sorted(labels)


def choose_metric(class_counts: Mapping[str, int], requested: str = "auto") -> tuple[str, str]:
    """(metric, reason). auto: macro-F1 when the smallest class has fewer than IMBALANCE_RATIO times the
    rows of the largest, else accuracy."""
    if requested not in METRIC_CHOICES:
        raise DataFileError(f"unknown metric {requested!r}; use one of {', '.join(METRIC_CHOICES)}")
    counts = [c for c in class_counts.values() if c > 0]
    ratio = min(counts) / max(counts)
    shares = f"smallest/largest class = {min(counts):,}/{max(counts):,} = {ratio:.2f}"
    if requested != "auto":
        return requested, f"chosen by the user ({shares})"
    if ratio < IMBALANCE_RATIO:
        return "macro_f1", f"imbalanced classes: {shares} < {IMBALANCE_RATIO}"
    return "accuracy", f"balanced enough: {shares} >= {IMBALANCE_RATIO}"


def suggest_max_length(words: np.ndarray) -> tuple[int, str]:
    p95 = float(np.percentile(words, 95)) if words.size else 0.0
    tokens = 1.5 * p95 + 3
    low, high = MAX_LENGTH_BOUNDS
    value = int(min(high, max(low, 16 * math.ceil(tokens / 16))))
    return value, (f"95th percentile {p95:.0f} words -> about {tokens:.0f} tokens (1.5 per word + 3 special), "
                   f"rounded up to a multiple of 16 within {low}-{high}")


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


# -- registration -----------------------------------------------------------------------------------

def _check_columns(path: Path, fmt: str, choice: ColumnChoice) -> None:
    available = files.list_columns(path, fmt)
    if choice.rationale_unit not in RATIONALE_UNITS:
        raise DataFileError(f"unknown rationale unit {choice.rationale_unit!r}; use one of {', '.join(RATIONALE_UNITS)}")
    problems = []
    for role, column in choice.roles().items():
        if column in available:
            continue
        close = get_close_matches(column, available, n=3, cutoff=0.6) or [a for a in available if a.lower() == column.lower()]
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        problems.append(f"no column {column!r} for the {role}{hint}")
    if problems:
        raise DataFileError(f"{path}: {'; '.join(problems)} (columns: {', '.join(map(repr, available))}); nothing was registered")
    if choice.text == choice.label:
        raise DataFileError(f"{path}: the text and the label cannot be the same column ({choice.text!r})")


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
    _check_columns(path, fmt, choice)
    if metric not in METRIC_CHOICES:
        raise DataFileError(f"unknown metric {metric!r}; use one of {', '.join(METRIC_CHOICES)}")
    before = files.fingerprint(path, fmt)
    names = files.class_label_names(path, label_column) if fmt == "arrow" else None
    problems = _Problems(path, "line" if fmt == "jsonl" else "row")
    scan = _scan(path, fmt, choice, problems, names=names, chunk_rows=chunk_rows, progress=progress, should_stop=should_stop)
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
    problems = _Problems(path, manifest.get("row_unit", "row"))
    names = files.class_label_names(path, choice.label) if manifest["format"] == "arrow" else None
    scan = _scan(path, manifest["format"], choice, problems, names=names, collect=True, chunk_rows=chunk_rows)
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


# -- a model's labels: engine.data.labels (re-exported here, where callers first found them) -----------

# -- uploads ----------------------------------------------------------------------------------------

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


def guess_columns(columns: Sequence[str]) -> dict[str, str | None]:
    """Likely columns for each role from their names (a page's default choice, never applied silently)."""
    lowered = {c.lower(): c for c in columns}

    def first(*candidates):
        return next((lowered[c] for c in candidates if c in lowered), None)

    text = first("text", "sentence", "review", "content", "document", "premise", "sentence1", "question1", "tweet", "body")
    return {
        "text": text or (columns[0] if columns else None),
        "label": first("label", "labels", "class", "target", "sentiment", "category", "y", "gold_label"),
        "pair": first("hypothesis", "sentence2", "question2", "question", "query"),
        "split": first("split", "subset", "fold", "partition"),
        "rationale": first("rationale", "rationales", "evidence", "highlight", "highlights"),
    }


def suggest_dataset_name(filename: str) -> str:
    """A valid dataset name from a file name ('My Reviews (2).csv' -> 'my-reviews-2'), not yet registered."""
    stem = Path(filename).stem.lower()
    name = re.sub(r"[^a-z0-9._-]+", "-", stem).strip("-._")[:56] or "my-data"
    from engine.data import PACKAGED_DATASETS

    taken = set(user_dataset_names()) | set(PACKAGED_DATASETS)
    candidate, k = name, 2
    while candidate in taken:
        candidate, k = f"{name}-{k}", k + 1
    return candidate
