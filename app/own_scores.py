"""Upload of one's own explanation scores on the Benchmarks page: the file formats `evaluate --scores` reads
(docs/own-explanations.md), checked row by row, then evaluated beside built-in measures on the same inputs with
the erasure metrics (and NAOPC), the gold label explained as `evaluate` does.

The logic lives here (no Streamlit), so tests drive it with a file they make; the page only passes the uploaded
bytes and shows the table or the error (escaped with app.text.md: an error quotes the file's text)."""
from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from engine.errors import InvalidInputError

SUFFIXES = (".csv", ".json", ".jsonl")
MAX_BYTES = 20 * 1024 * 1024  # an upload is parsed in memory; 20 MB holds about 400,000 scored CSV lines
MAX_INPUTS = 200  # erasure metrics on the page run while the reader waits
SUMMARY_METRICS = ("aopc-comprehensiveness", "aopc-sufficiency", "naopc-comprehensiveness", "comprehensiveness",
                   "sufficiency")


class UploadError(InvalidInputError):
    """An upload that cannot be evaluated; the message names the file and, where it applies, its row."""


@dataclass
class UploadResult:
    """table: one row per (metric, level) with a column per measure (mean over the inputs, the imported ones and
    the built-in ones side by side); per_input: {measure: {metric: values [n]}}; measures: the imported measure
    ids; n_inputs: the inputs evaluated (those the file scores, in dataset order, at most `limit`)."""

    table: pd.DataFrame
    per_input: dict
    measures: list[str]
    n_inputs: int


def safe_name(filename: str) -> str:
    """The measure name an upload gets from its file name: letters, digits, '-', '_' and '.' only (at most 40)."""
    stem = Path(str(filename)).stem
    name = re.sub(r"[^0-9A-Za-z_.-]+", "-", stem).strip("-.")[:40]
    return name or "upload"


def save_upload(data: bytes, filename: str, folder: str | Path | None = None) -> Path:
    """Write the uploaded bytes under a fresh temporary folder with a safe name and the file's own extension
    (the reader picks the format by it). Refuses other extensions and oversized files."""
    suffix = Path(str(filename)).suffix.lower()
    if suffix not in SUFFIXES:
        raise UploadError(f"{filename}: unsupported file type {suffix or '(none)'!r}; use one of {', '.join(SUFFIXES)}")
    if len(data) > MAX_BYTES:
        raise UploadError(f"{filename}: {len(data) / 1e6:.1f} MB is over the {MAX_BYTES / 1e6:.0f} MB an upload may have; "
                          "evaluate it with `python -m engine metrics --scores FILE`")
    if not data.strip():
        raise UploadError(f"{filename}: the file is empty")
    target = Path(tempfile.mkdtemp(prefix="engine-upload-", dir=folder)) / (safe_name(filename) + suffix)
    target.write_bytes(data)
    return target


def evaluate_upload(data: bytes, filename: str, classifier, dataset, split: str = "test",
                    builtin: tuple[str, ...] = ("loo-sign", "random"), limit: int = 50, naopc: bool = True,
                    name: str | None = None, progress=None, folder: str | Path | None = None) -> UploadResult:
    """Read, check and align an uploaded scores file against `dataset`'s `split` and the classifier's tokens
    (any bad row refuses the whole file, naming it), then compute the erasure metrics (comprehensiveness and
    sufficiency families, MaSF-free) and, with `naopc`, NAOPC for each imported measure and each `builtin`
    measure on the first `limit` inputs the file scores. progress(done, total) counts measures. The upload is
    saved under a fresh temporary folder (in `folder`, else the system's) that is removed when the evaluation ends
    or fails."""
    from engine.importance import MEASURES

    if not 1 <= limit <= MAX_INPUTS:
        raise UploadError(f"limit must be 1..{MAX_INPUTS} inputs, got {limit}")
    unknown = [m for m in builtin if m not in MEASURES]
    if unknown:
        raise UploadError(f"unknown built-in measure(s) {', '.join(unknown)}; known: {', '.join(sorted(MEASURES))}")
    path = save_upload(data, filename, folder)
    try:  # the file is read whole by import_scores: its folder goes when the evaluation ends or fails
        return _evaluate_saved(path, filename, classifier, dataset, split, builtin, limit, naopc, name, progress)
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)


def _evaluate_saved(path: Path, filename: str, classifier, dataset, split, builtin, limit, naopc, name,
                    progress) -> UploadResult:
    from engine.faithfulness.erasure import erasure_metrics
    from engine.importance import MEASURES, get_explainer
    from engine.importance.imported import import_scores, target_index

    examples = dataset.split(split)
    registered = import_scores(path, examples, classifier, name=name or safe_name(filename), split=split)
    order = {e.uid: i for i, e in enumerate(examples)}
    scored = None
    for mid in registered:
        for row, ex, _spans in MEASURES[mid].pairs:  # the gold label is explained: so must the file
            wanted = target_index(row.target, classifier.classes)
            if wanted is not None and wanted != ex.label:
                raise UploadError(f"{filename}, {row.where}: it explains class {classifier.classes[wanted]!r} but the "
                                  f"gold label {classifier.classes[ex.label]!r} is explained here")
        uids = {ex.uid for _row, ex, _spans in MEASURES[mid].pairs}
        scored = uids if scored is None else scored & uids
    chosen = sorted(scored, key=order.get)[:limit]
    if not chosen:
        raise UploadError(f"{filename}: its measures score no input in common")
    batch_examples = [examples[order[u]] for u in chosen]
    batch = classifier.batch_of(batch_examples)
    target = batch.target
    measures = list(registered) + [m for m in builtin if m not in registered]
    per_input, rows = {}, []
    for i, mid in enumerate(measures):
        imp = get_explainer(mid, classifier, memo=False).attribute(batch, target)
        res = erasure_metrics(classifier, batch, imp.scores, target=target, metrics=["comprehensiveness", "sufficiency"])
        if naopc:
            from engine.faithfulness.naopc import add_naopc

            add_naopc(res, classifier, batch, imp.scores, target=target)
        per_input[mid] = {k: np.asarray(v, dtype=float) for k, v in res.values.items()}
        for rec in res.summary():
            rows.append({"measure": mid, "metric": rec["metric"], "level": rec["level"], "value": rec["value"],
                         "better": rec["better"]})
        if progress is not None:
            progress(i + 1, len(measures))
    # one row per (metric, level) in the order the metrics came, a column per measure (no cartesian product)
    table_rows: dict[tuple, dict] = {}
    for r in rows:
        key = (r["metric"], None if pd.isna(r["level"]) else r["level"])
        table_rows.setdefault(key, {"metric": r["metric"], "level": r["level"], "better": r["better"]})[r["measure"]] = r["value"]
    table = pd.DataFrame(list(table_rows.values()), columns=["metric", "level", "better", *measures])
    return UploadResult(table=table, per_input=per_input, measures=list(registered), n_inputs=len(chosen))


def aggregate_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Only the one-number metrics (AOPC, NAOPC), first: what a reader compares at a glance."""
    head = table[table["metric"].isin(SUMMARY_METRICS) & table["level"].isna()]
    return head.reset_index(drop=True)
