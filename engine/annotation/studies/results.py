"""A study's results: ratings of measures with confidence intervals, agreement, per-annotator progress and
quality, and the export (JSONL and formula-safe CSV) with the study's provenance.

Ratings: TrueSkill and Bradley-Terry as on the Annotate page (`ranking.py`: the trueskill package; the
Bradley-Terry fit is the store's own MM fit with a small symmetric prior, kept rather than `choix` so that a
study and `annotations stats` give the same numbers for the same rankings, with one dependency fewer).
Confidence intervals: percentile bootstrap over annotators: annotators are drawn with replacement (all
their rankings come along), the ratings refitted, and the 2.5% and 97.5% quantiles reported. Annotators,
not rankings, are resampled because one person's rankings are not independent of each other.

Agreement:
- Krippendorff's alpha on rankings (the `krippendorff` package, ordinal level): a unit is one (task,
  measure) pair, a coder one annotator, the value the measure's rank in that annotator's ranking of the
  task (1 = best; tied measures share their average rank). 'Cannot decide' leaves the coder's values missing.
- Kendall's W per task ranked by 2+ annotators, and its mean (`agreement.ranking_agreement`).
- Rationale agreement: Krippendorff's alpha (nominal, per token) and mean Cohen's kappa (`agreement.rationale_agreement`).
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from engine.annotation.records import utc_now
from engine.annotation.studies.quality import QualityThresholds, annotator_quality, excluded_annotators
from engine.atomic import atomic_file, write_text
from engine.csv_safe import safe_row
from engine.plausibility.agreement import ranking_agreement, rationale_agreement
from engine.plausibility.ranking import bradley_terry, measure_rankings, trueskill_ratings

EXPORT_FORMAT = "engine-study"
EXPORT_VERSION = 1
CSV_COLUMNS = ("study_id", "model_id", "dataset", "code_version", "submission_id", "task_id", "check_kind", "annotator",
               "worker_id", "slot", "measure", "rank", "cannot_decide", "rationale", "comment", "passed", "seconds",
               "excluded", "created_at")


def _nan_to_none(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_nan_to_none(v) for v in value]
    return value


def krippendorff_alpha_rankings(rankings: Sequence, tasks: Mapping[str, object]) -> float:
    """Krippendorff's alpha (ordinal) of rankings (see the module docstring). `rankings`: store `Ranking`s
    (one per annotator and task); tasks: id -> Task. NaN when fewer than two annotators ranked a common task
    or nothing varies."""
    import krippendorff
    from scipy import stats

    annotators = sorted({r.annotator for r in rankings})
    values: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for r in rankings:
        if r.cannot_decide or not r.ordering:
            continue
        measure_of = tasks[r.task_id].measure_of()
        ranks = r.slot_ranks()
        slots = sorted(ranks)
        average = stats.rankdata([ranks[s] for s in slots], method="average")
        for slot, value in zip(slots, average):
            values[(r.task_id, measure_of[slot])][r.annotator] = float(value)
    units = [u for u in sorted(values) if len(values[u]) >= 2]
    if len(annotators) < 2 or not units:
        return math.nan
    matrix = np.array([[values[u].get(a, np.nan) for u in units] for a in annotators], dtype=float)
    if len(np.unique(matrix[~np.isnan(matrix)])) < 2:
        return math.nan
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal"))


def _ordered_by_annotator(rankings: Sequence) -> dict[str, list]:
    by: dict[str, list] = defaultdict(list)
    for r in rankings:
        by[r.annotator].append(r)
    return by


def bootstrap_ratings(rankings: Sequence, tasks: Mapping[str, object], n_boot: int = 200, seed: int = 0,
                      level: float = 0.95) -> dict:
    """TrueSkill and Bradley-Terry rows (`ranking.py`) with percentile-bootstrap intervals over annotators.

    Returns {"trueskill": rows with mu_low/mu_high and conservative_low/conservative_high added,
    "bradley_terry": rows with strength_low/strength_high, "n_boot", "level", "annotators"}. With fewer than
    two annotators or n_boot = 0 the interval fields are None."""
    order = {id(r): i for i, r in enumerate(rankings)}
    ranked = measure_rankings(rankings, tasks)
    ts, bt = trueskill_ratings(ranked), bradley_terry(ranked)
    by = _ordered_by_annotator(rankings)
    names = sorted(by)
    samples: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    if n_boot > 0 and len(names) >= 2:
        rng = np.random.default_rng(seed)
        for _ in range(n_boot):
            drawn = [names[i] for i in rng.integers(0, len(names), len(names))]
            # keep submission order (TrueSkill is an online update); a twice-drawn annotator counts twice
            sample = sorted((r for name in drawn for r in by[name]), key=lambda r: order[id(r)])
            sample_ranked = measure_rankings(sample, tasks)
            for row in trueskill_ratings(sample_ranked):
                samples[row["measure"]]["mu"].append(row["mu"])
                samples[row["measure"]]["conservative"].append(row["conservative"])
            for row in bradley_terry(sample_ranked):
                samples[row["measure"]]["strength"].append(row["strength"])
    tail = (1 - level) / 2

    def interval(measure: str, key: str) -> tuple[float | None, float | None]:
        got = samples.get(measure, {}).get(key)
        if not got:
            return None, None
        return float(np.quantile(got, tail)), float(np.quantile(got, 1 - tail))

    for row in ts:
        row["mu_low"], row["mu_high"] = interval(row["measure"], "mu")
        row["conservative_low"], row["conservative_high"] = interval(row["measure"], "conservative")
    for row in bt:
        row["strength_low"], row["strength_high"] = interval(row["measure"], "strength")
    return {"trueskill": ts, "bradley_terry": bt, "n_boot": n_boot if len(names) >= 2 else 0, "level": level,
            "annotators": len(names)}


def study_results(studies, study_id: str, exclude: str = "marked", n_boot: int = 200, seed: int = 0,
                  thresholds: QualityThresholds | None = None) -> dict:
    """Everything the organiser sees about a study, as plain data (JSON-ready, NaN as None).

    Args:
        studies: a `StudyStore`.
        exclude: 'marked' (leave out the annotators the organiser excluded), 'flagged' (also every flagged
            annotator) or 'none'.
        n_boot: bootstrap draws for the rating intervals (0: none).
        thresholds: when annotators are flagged (`quality.QualityThresholds`).
    Returns a dict: study (provenance), exclude, excluded, coverage, annotators (progress and quality per
    annotator), ratings (TrueSkill and Bradley-Terry with intervals), agreement (krippendorff_alpha_rankings,
    kendalls_w, kendalls_w_tasks, rationale)."""
    status = studies.status(study_id)
    study = status.study
    answers = studies.answers(study_id)
    quality = annotator_quality(answers, studies.excluded(study_id), thresholds)
    left_out = excluded_annotators(quality, exclude)
    tasks = studies.tasks(study_id)
    rankings = studies.rankings(study_id, exclude=left_out)
    rationales = studies.rationales(study_id, exclude=left_out)
    by_quality = {q.annotator: q for q in quality}
    annotators = []
    for p in status.participants:
        q = by_quality.get(p.label)
        annotators.append({
            "annotator": p.label, "worker_id": p.worker_id, "invitation": p.invitation, "answered": p.answered,
            "assigned": p.assigned, "pending": p.pending, "total": study.items_per_annotator,
            "finished": p.finished_at is not None, "released": p.released, "started_at": p.started_at,
            "finished_at": p.finished_at, "checks": p.checks_answered, "checks_failed": p.checks_failed,
            "median_seconds": q.median_seconds if q else math.nan,
            "straightline_share": q.straightline_share if q else math.nan,
            "flags": list(q.flags) if q else [], "flagged": bool(q and q.flags), "excluded": p.excluded,
            "exclusion_reason": p.exclusion_reason, "left_out": p.label in left_out})
    agreement = ranking_agreement(rankings, tasks) if rankings else {"mean_W": math.nan, "tasks": 0, "per_task": []}
    result = {
        "study": study_provenance(study),
        "exclude": exclude,
        "excluded": left_out,
        "coverage": {"tasks": study.n_tasks, "overlap": study.config.overlap, "complete": status.complete,
                     "over": status.over, "remaining_answers": status.remaining_slots, "answers": status.answers,
                     "annotators": len(status.participants), "annotators_needed": study.annotators_needed,
                     "per_task": status.coverage},
        "annotators": annotators,
        "ratings": bootstrap_ratings(rankings, tasks, n_boot=n_boot, seed=seed) if rankings else
        {"trueskill": [], "bradley_terry": [], "n_boot": 0, "level": 0.95, "annotators": 0},
        "agreement": {
            "krippendorff_alpha_rankings": krippendorff_alpha_rankings(rankings, tasks) if rankings else math.nan,
            "kendalls_w": agreement["mean_W"], "kendalls_w_tasks": agreement["tasks"],
            "rationale": rationale_agreement(rationales, tasks) if rationales else
            {"alpha": math.nan, "mean_kappa": math.nan, "tasks": 0, "annotators": 0},
        },
    }
    return _nan_to_none(result)


def study_provenance(study) -> dict:
    """The study's design and provenance as plain data (what every export starts with)."""
    from engine.annotation.schema import SCHEMA_VERSION
    from engine.annotation.studies.schema import STUDY_SCHEMA_VERSION

    return {"id": study.id, "name": study.name, "state": study.state, "config": asdict(study.config),
            "n_tasks": study.n_tasks, "n_checks": study.n_checks, "created_at": study.created_at,
            "closed_at": study.closed_at, "code_version": study.code_version, "command_line": study.command_line,
            "completion_code": study.completion_code, "annotators_needed": study.annotators_needed,
            "store_schema_version": SCHEMA_VERSION, "study_schema_version": STUDY_SCHEMA_VERSION}


def export_records(studies, study_id: str, exclude: str = "marked", n_boot: int = 200) -> list[dict]:
    """The JSONL export as records: meta (provenance), task, check, participant, answer, results."""
    results = study_results(studies, study_id, exclude=exclude, n_boot=n_boot)
    status = studies.status(study_id)
    tasks = studies.tasks(study_id)
    records: list[dict] = [{"type": "meta", "format": EXPORT_FORMAT, "version": EXPORT_VERSION, "exported_at": utc_now(),
                            "study": results["study"]}]
    for task in tasks.values():
        record = {"type": "task", **asdict(task)}
        record["explanations"] = [asdict(e) for e in task.explanations]
        records.append(record)
    for check in studies.check_items(study_id):
        records.append({"type": "check", "kind": check.kind, "expected": check.expected, "note": check.note,
                        "task": {**asdict(check.task), "explanations": [asdict(e) for e in check.task.explanations]}})
    flags = {a["annotator"]: a for a in results["annotators"]}
    for p in status.participants:
        records.append({"type": "participant", "annotator": p.label, "worker_id": p.worker_id, "invitation": p.invitation,
                        "started_at": p.started_at, "consented_at": p.consented_at, "finished_at": p.finished_at,
                        "released": p.released,
                        "excluded": p.excluded, "exclusion_reason": p.exclusion_reason,
                        "flags": flags.get(p.label, {}).get("flags", [])})
    for a in studies.answers(study_id):
        measures = tasks[a.task_id].measure_of() if a.task_id else None
        records.append({"type": "answer", "submission_id": a.submission_id, "task_id": a.task_id, "check_kind": a.check_kind,
                        "annotator": a.annotator, "ordering": [list(g) for g in a.ordering], "measures": measures,
                        "cannot_decide": a.cannot_decide, "rationale": None if a.rationale is None else list(a.rationale),
                        "comment": a.comment, "passed": a.passed, "seconds": a.seconds, "assigned_at": a.assigned_at,
                        "created_at": a.created_at})
    records.append({"type": "results", **{k: v for k, v in results.items() if k != "study"}})
    return records


def export_jsonl(studies, study_id: str, path: str | os.PathLike, exclude: str = "marked", n_boot: int = 200) -> int:
    """Write the study as JSON lines (atomically). Returns the lines written."""
    records = export_records(studies, study_id, exclude=exclude, n_boot=n_boot)
    with atomic_file(Path(path)) as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=True, default=str) + "\n")
    return len(records)


def answers_csv(studies, study_id: str) -> str:
    """The answers as a tidy, formula-safe CSV: one row per answer and slot (a rationale-only answer: one
    row), with the study's provenance in the first columns and `excluded` per annotator."""
    study = studies.study(study_id)
    status = studies.status(study_id)
    workers = {p.label: p.worker_id for p in status.participants}
    excluded = set(studies.excluded(study_id))
    tasks = studies.tasks(study_id)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    head = [study.id, study.config.model_id, study.config.dataset, study.code_version]
    for a in studies.answers(study_id):
        measure_of = tasks[a.task_id].measure_of() if a.task_id else {}
        tail = [a.cannot_decide, " ".join(map(str, a.rationale)) if a.rationale is not None else "", a.comment or "",
                "" if a.passed is None else a.passed, round(a.seconds, 3), a.annotator in excluded, a.created_at]
        ranks = {slot: rank + 1 for rank, group in enumerate(a.ordering) for slot in group}
        base = head + [a.submission_id, a.task_id or "", a.check_kind or "", a.annotator, workers.get(a.annotator) or ""]
        if ranks:
            for slot in sorted(ranks):
                writer.writerow(safe_row(base + [slot, measure_of.get(slot, ""), ranks[slot]] + tail))
        else:
            writer.writerow(safe_row(base + ["", "", ""] + tail))
    return out.getvalue()


def export_csv(studies, study_id: str, path: str | os.PathLike) -> Path:
    """Write `answers_csv` atomically."""
    return write_text(path, answers_csv(studies, study_id))
