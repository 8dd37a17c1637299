"""Validation of a data file for registration: one pass in chunks that checks every row of the chosen columns
(text, second text, label, split, rationale), counts classes and splits, and decides from the counts the class
order, the metric and a max length. Nothing here writes anything (`engine.data.user_registry` registers).

The rules are listed in `engine.data.user` (and, for users, docs/own-data.md).
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import get_close_matches
from pathlib import Path

import numpy as np

from engine.data import files
from engine.errors import Cancelled, DataFileError

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



# -- problems found while scanning ----------------------------------------------------------------------

class RowProblems:
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


def _labels_as_text(array, column: str, path: Path, names: Sequence[str] | None, rows: np.ndarray, problems: RowProblems):
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
class FileScan:
    """What one pass learnt: counts always; the rows themselves only when loading (collect=True)."""

    rows: int = 0
    class_counts: Counter = field(default_factory=Counter)
    first_row: dict = field(default_factory=dict)  # class -> first row carrying it
    split_class_counts: Counter = field(default_factory=Counter)  # (split, class) -> rows
    words: list = field(default_factory=list)  # [chunk] int32 arrays of words per input
    rationales: int = 0
    examples: list | None = None  # (row, split or None, text, label text, pair, spans)


def scan_file(path: Path, fmt: str, choice: ColumnChoice, problems: RowProblems, *, names: Sequence[str] | None = None,
          collect: bool = False, chunk_rows: int = files.DEFAULT_CHUNK_ROWS,
          progress: Callable[[int, int], None] | None = None, should_stop: Callable[[], bool] | None = None) -> FileScan:
    """One pass over the file in chunks: every row checked, counts kept, texts kept only when `collect`."""
    import pyarrow.compute as pc

    scan = FileScan()
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



def check_columns(path: Path, fmt: str, choice: ColumnChoice) -> None:
    """Refuse, before any row is read, a column choice naming a column the file lacks (DataFileError listing the
    file's columns), an unknown rationale unit, or one column for both the text and the label."""
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

