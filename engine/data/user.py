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

This module keeps the names callers import (`from engine.data.user import register_dataset`); the code lives by
concept in `engine.data.user_validation` (checking a file's rows and columns), `engine.data.user_uploads` (where
uploaded files are stored) and `engine.data.user_registry` (manifests: register, list, load, remove).
"""
from __future__ import annotations

from engine.data.labels import check_labels
from engine.data.user_registry import (
    MANIFEST_VERSION,
    NAME_PATTERN,
    check_dataset_name,
    datasets_dir,
    get_user_dataset,
    is_registered_file,
    list_user_datasets,
    load_user_dataset,
    manifest_path,
    prune_uploads,
    read_manifest,
    register_dataset,
    remove_user_dataset,
    source_state,
    split_class_counts,
    suggest_dataset_name,
    summary_from_manifest,
    user_dataset_names,
    verify_source,
)
from engine.data.user_uploads import UPLOAD_SUFFIXES, check_upload_name, save_upload, uploads_dir
from engine.data.user_validation import (
    IMBALANCE_RATIO,
    MAX_CLASSES,
    MAX_LENGTH_BOUNDS,
    METRIC_CHOICES,
    RATIONALE_UNITS,
    SPLIT_ALIASES,
    ColumnChoice,
    choose_metric,
    guess_columns,
    order_classes,
    parse_rationale,
    suggest_max_length,
)

__all__ = [
    "IMBALANCE_RATIO", "MANIFEST_VERSION", "MAX_CLASSES", "MAX_LENGTH_BOUNDS", "METRIC_CHOICES", "NAME_PATTERN",
    "RATIONALE_UNITS", "SPLIT_ALIASES", "UPLOAD_SUFFIXES", "ColumnChoice", "check_dataset_name",
    "check_labels", "check_upload_name", "choose_metric", "datasets_dir", "get_user_dataset", "guess_columns",
    "is_registered_file", "list_user_datasets", "load_user_dataset", "manifest_path", "order_classes",
    "parse_rationale", "prune_uploads", "read_manifest", "register_dataset", "remove_user_dataset", "save_upload",
    "source_state", "split_class_counts", "suggest_dataset_name", "suggest_max_length", "summary_from_manifest",
    "uploads_dir", "user_dataset_names", "verify_source",
]
