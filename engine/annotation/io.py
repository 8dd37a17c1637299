"""Export and import every annotation as JSON lines (ERASER-like), and rankings as a CSV.

One JSON object per line, with a `type`:
  meta       format name and version, schema version, export time
  annotator  name (verbatim), created_at
  task       the input, tokens, gold rationale, provenance, and `explanations` (slot, measure, options,
             target, code version, scores)
  ranking    annotation_id (the submission id), docid (task id), annotator, ordering (groups of slots,
             best first), measures (slot -> measure, for readers), cannot_decide, created_at
  rationale  ERASER's annotation fields: annotation_id, docid, classification (the label), query (the
             auxiliary text), evidences [[{docid, start_token, end_token, text}]] (one per contiguous run
             of marked tokens; end exclusive), plus annotator, tokens, created_at
Importing is idempotent (tasks by id, annotators by name, submissions by id) and atomic: a file with a
bad line imports nothing. Export -> import into an empty store reproduces the store.
"""
from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from engine.annotation.records import normalise_ordering, utc_now
from engine.annotation.schema import SCHEMA_VERSION
from engine.annotation.store import AnnotationStore
from engine.atomic import atomic_file
from engine.csv_safe import safe_row
from engine.errors import InvalidInputError
from engine.plausibility.rationales import spans_of
from engine.plausibility.tasks import AnonymisedExplanation, Task

FORMAT = "engine-annotations"
FORMAT_VERSION = 1
CSV_COLUMNS = ("submission_id", "task_id", "model_id", "dataset", "example_uid", "annotator", "slot", "measure",
               "rank", "cannot_decide", "created_at")


def _task_record(task: Task) -> dict:
    record = {"type": "task", **asdict(task)}
    record["explanations"] = [asdict(e) for e in task.explanations]
    return record


def export_records(store: AnnotationStore) -> Iterator[dict]:
    """Every row of the store as export records (all submissions, not only the latest)."""
    yield {"type": "meta", "format": FORMAT, "version": FORMAT_VERSION, "schema_version": SCHEMA_VERSION,
           "exported_at": utc_now()}
    for name, created_at in store.query("SELECT name, created_at FROM annotators ORDER BY id"):
        yield {"type": "annotator", "name": name, "created_at": created_at}
    tasks = {t.id: t for t in store.tasks()}
    for task in tasks.values():
        yield _task_record(task)
    for r in store.rankings(latest_only=False):
        yield {"type": "ranking", "annotation_id": r.submission_id, "docid": r.task_id, "annotator": r.annotator,
               "ordering": [list(g) for g in r.ordering], "measures": tasks[r.task_id].measure_of(),
               "cannot_decide": r.cannot_decide, "created_at": r.created_at}
    for r in store.rationales(latest_only=False):
        task = tasks[r.task_id]
        evidences = [{"docid": r.task_id, "start_token": s, "end_token": e, "text": " ".join(task.tokens[s:e])}
                     for s, e in spans_of(r.tokens)]
        yield {"type": "rationale", "annotation_id": r.submission_id, "docid": r.task_id, "annotator": r.annotator,
               "classification": task.label_name, "query": task.auxiliary, "evidences": [evidences],
               "tokens": list(r.tokens), "created_at": r.created_at}


def export_jsonl(store: AnnotationStore, path: str | os.PathLike) -> int:
    """Write every annotation to `path` (atomically: a temporary file renamed). Returns lines written."""
    path = Path(path)
    n = 0
    with atomic_file(path) as f:
        for record in export_records(store):
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    return n


def _read_records(path: str | os.PathLike) -> list[dict]:
    records = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise InvalidInputError(f"{path}:{lineno}: not a JSON line ({err.msg}); nothing was imported") from None
            if not isinstance(record, dict) or record.get("type") not in {"meta", "annotator", "task", "ranking", "rationale"}:
                raise InvalidInputError(f"{path}:{lineno}: not an annotation record (needs a 'type'); nothing was imported")
            record["_line"] = lineno
            records.append(record)
    meta = [r for r in records if r["type"] == "meta"]
    if meta and meta[0].get("format") != FORMAT:
        raise InvalidInputError(f"{path} is not an annotation export (format {meta[0].get('format')!r}); nothing was imported")
    if meta and int(meta[0].get("version", 0)) > FORMAT_VERSION:
        raise InvalidInputError(f"{path} was written by a newer version (format {meta[0]['version']}); nothing was imported")
    return records


def _task_from_record(r: dict) -> Task:
    fields = {k: v for k, v in r.items() if k not in ("type", "_line", "explanations")}
    for key in ("tokens", "gold_rationale"):
        if fields.get(key) is not None:
            fields[key] = tuple(fields[key])
    explanations = tuple(AnonymisedExplanation(**{**e, "scores": tuple(e["scores"])}) for e in r["explanations"])
    return Task(**fields, explanations=explanations)


def import_jsonl(store: AnnotationStore, path: str | os.PathLike) -> dict[str, int]:
    """Import an export into `store` in one transaction. Returns the new rows per type (rows already
    there, by id or name, are skipped); raises ValueError naming the line of a bad record."""
    records = _read_records(path)
    added = {"annotators": 0, "tasks": 0, "rankings": 0, "rationales": 0}
    with store.transaction() as conn:
        for r in records:
            kind, where = r["type"], f"{path}:{r['_line']}"
            try:
                if kind == "annotator":
                    cur = conn.execute("INSERT OR IGNORE INTO annotators (name, created_at) VALUES (?, ?)",
                                       (r["name"], r.get("created_at") or utc_now()))
                    added["annotators"] += cur.rowcount
                elif kind == "task":
                    added["tasks"] += store.insert_task(conn, _task_from_record(r))
                elif kind == "ranking":
                    groups = () if r["cannot_decide"] else normalise_ordering(r["ordering"])
                    slots = store.task_slots(conn, r["docid"])
                    if not r["cannot_decide"] and sorted(s for g in groups for s in g) != sorted(slots):
                        raise InvalidInputError(f"the ordering does not place the task's slots {slots} exactly once")
                    added["rankings"] += store.insert_ranking(conn, r["annotation_id"], r["docid"], r["annotator"],
                                                               groups, bool(r["cannot_decide"]), r.get("created_at"))
                elif kind == "rationale":
                    tokens = r.get("tokens")
                    if tokens is None:  # a plain ERASER record: tokens from the evidence spans
                        tokens = [t for group in r["evidences"] for ev in group
                                  for t in range(ev["start_token"], ev["end_token"])]
                    selected = sorted({int(t) for t in tokens})
                    n = store.task_size(conn, r["docid"])
                    if any(not 0 <= t < n for t in selected):
                        raise InvalidInputError(f"token indices outside the task's {n} tokens")
                    added["rationales"] += store.insert_rationale(conn, r["annotation_id"], r["docid"], r["annotator"],
                                                                   selected, r.get("created_at"))
            except (KeyError, TypeError) as err:
                raise InvalidInputError(f"{where}: a {kind} record lacks or mistypes {err}; nothing was imported") from None
            except ValueError as err:
                raise InvalidInputError(f"{where}: {err}; nothing was imported") from None
    return added


def rankings_csv(store: AnnotationStore, model_id: str | None = None, latest_only: bool = False) -> str:
    """Rankings as a tidy CSV: one row per (submission, explanation) with the slot's measure and rank
    (1 = best, ties share a rank; empty for cannot-decide)."""
    tasks = {t.id: t for t in store.tasks(model_id)}
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    # safe_row: annotator names and class names are typed by people; none may run as a spreadsheet formula
    for r in store.rankings(model_id, latest_only=latest_only):
        task = tasks[r.task_id]
        ranks = r.slot_ranks()
        for e in task.explanations:
            rank = ranks.get(e.slot)
            writer.writerow(safe_row([r.submission_id, r.task_id, task.model_id, task.dataset or "", task.example_uid or "",
                             r.annotator, e.slot, e.measure, "" if rank is None else rank + 1, int(r.cannot_decide),
                             r.created_at]))
    return out.getvalue()


def export_text(store: AnnotationStore) -> str:
    """The JSONL export as one string (for a download button)."""
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in export_records(store))
