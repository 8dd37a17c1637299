"""Reading studies: a study and its list, an annotator's progress, the organiser's status, the answers and what
results and quality are computed from (rankings and rationales as the store's records, the tasks, the checks)."""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path

from engine.annotation.records import Ranking, Rationale
from engine.annotation.store import AnnotationStore
from engine.annotation.studies.errors import UnknownStudyError
from engine.annotation.studies.records import (
    DEFAULT_WORKER_PARAM,
    CheckItem,
    ParticipantStatus,
    Progress,
    Session,
    Study,
    StudyAnswer,
    StudyStatus,
    config_from_json,
    parse_time,
    seconds_between,
    task_from_json,
)
from engine.annotation.studies.schema import migrate_studies
from engine.annotation.studies.seats import seat_positions
from engine.plausibility.tasks import Task


class StudyReader:
    """What the organiser and the dashboard read of the studies in the annotation database at `path` (default: the
    store's default), their tables created and migrated on open; `StudyStore` adds every operation that changes a
    study. Every method is one short read; safe across threads and processes (it holds no connection). It reaches
    the database through `AnnotationStore`'s connection level (`connect`, `transaction`, `query`, `insert_task`);
    its underscore methods (`_study`, `_read`, `_tx`, ...) are for `StudyStore`, its subclass, alone."""

    def __init__(self, path: str | Path | AnnotationStore | None = None, *, busy_timeout: float = 30.0):
        self.annotations = path if isinstance(path, AnnotationStore) else AnnotationStore(path, busy_timeout=busy_timeout)
        self.path = self.annotations.path
        self._tasks: dict[str, Task] = {}  # tasks never change once stored (INSERT OR IGNORE), so caching is safe
        with self.annotations.connect() as conn:
            migrate_studies(conn)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def _tx(self):
        return self.annotations.transaction()

    def _read(self, sql: str, params: Sequence = ()) -> list[tuple]:
        return self.annotations.query(sql, params)

    def study(self, study_id: str) -> Study:
        """The study with this id, or UnknownStudyError listing the ids there are."""
        with self.annotations.connect() as conn:
            return self._study(conn, study_id)

    def _study(self, conn, study_id: str) -> Study:
        row = conn.execute("SELECT id, config, state, completion_code, created_at, closed_at, code_version, command_line "
                           "FROM studies WHERE id = ?", (study_id,)).fetchone()
        if row is None:
            known = [r[0] for r in conn.execute("SELECT id FROM studies ORDER BY created_at")]
            raise UnknownStudyError(f"no study {study_id!r}; studies: {', '.join(known) or 'none yet (study create)'}")
        n_tasks, n_checks = conn.execute(
            "SELECT COUNT(task_id), COUNT(check_kind) FROM study_items WHERE study_id = ?", (study_id,)).fetchone()
        has_open = conn.execute("SELECT 1 FROM study_invitations WHERE study_id = ? AND kind = 'open' "
                                "AND revoked_at IS NULL", (study_id,)).fetchone() is not None
        return Study(id=row[0], config=config_from_json(row[1]), state=row[2], n_tasks=n_tasks, n_checks=n_checks,
                     created_at=row[4], closed_at=row[5], code_version=row[6], command_line=row[7],
                     completion_code=row[3], has_open_link=has_open)

    def studies(self) -> list[Study]:
        """Every study, oldest first."""
        return [self.study(r[0]) for r in self._read("SELECT id FROM studies ORDER BY created_at, id")]

    def worker_params(self) -> set[str]:
        """The URL parameter names that carry a crowd worker's id, over every study (one query; the annotator's
        page reads the worker id before it knows which study the token opens)."""
        return {DEFAULT_WORKER_PARAM} | {json.loads(r[0]).get("worker_param") or DEFAULT_WORKER_PARAM
                                         for r in self._read("SELECT config FROM studies")}

    def _session(self, conn, study: Study, participant_id: int) -> Session:
        label, worker_id, started_at = conn.execute(
            "SELECT label, worker_id, started_at FROM study_participants WHERE id = ?", (participant_id,)).fetchone()
        c = study.config
        deadline = None
        if c.time_limit_minutes is not None:
            deadline = (parse_time(started_at) + timedelta(minutes=c.time_limit_minutes)).isoformat(timespec="microseconds")
        return Session(study_id=study.id, participant_id=participant_id, label=label, worker_id=worker_id, title=c.name,
                       instructions=c.instructions, consent=c.consent, kinds=c.kinds, started_at=started_at,
                       deadline=deadline, total=self._total(conn, study, participant_id), shown_as=c.shown_as)

    def consented(self, session: Session) -> bool:
        """Whether this annotator has accepted the consent text (so a resumed session can skip it)."""
        return self._read("SELECT consented_at IS NOT NULL FROM study_participants WHERE id = ?",
                          (session.participant_id,))[0][0] == 1

    @staticmethod
    def _total(conn, study: Study, pid: int) -> int:
        """Items this participant gets at most: their seat's tasks (the last seat may be shorter) plus the checks."""
        seat = conn.execute("SELECT seat FROM study_participants WHERE id = ?", (pid,)).fetchone()[0]
        c = study.config
        real = len(seat_positions(seat, study.n_tasks, c.overlap, c.tasks_per_annotator)) if seat is not None else 0
        return real + c.attention_checks

    def _task(self, conn, task_id: str) -> Task:
        # read through the store's own connection (WAL readers do not wait for our write lock); stored tasks are
        # immutable, so one read per task and StudyStore is enough
        task = self._tasks.get(task_id)
        if task is None:
            task = self._tasks[task_id] = self.annotations.task(task_id)
        return task

    def progress(self, session: Session) -> Progress:
        """Answered items of the annotator's total; `finished` (with the completion code) once they have no
        more items (`next_assignment` returned None)."""
        with self.annotations.connect() as conn:
            study = self._study(conn, session.study_id)
            answered = conn.execute("SELECT COUNT(*) FROM study_answers x JOIN study_assignments a ON a.id = x.assignment_id "
                                    "WHERE a.participant_id = ?", (session.participant_id,)).fetchone()[0]
            finished = conn.execute("SELECT finished_at FROM study_participants WHERE id = ?",
                                    (session.participant_id,)).fetchone()[0] is not None
            total = self._total(conn, study, session.participant_id)
        return Progress(answered=answered, total=max(total, answered), finished=finished,
                        completion_code=study.completion_code if finished else None)

    # -- organiser: status, answers, exclusion ---------------------------------------------------------
    def status(self, study_id: str) -> StudyStatus:
        """Per-annotator progress and check results, per-task coverage (answers and live assignments)."""
        with self.annotations.connect() as conn:
            study = self._study(conn, study_id)
            participants = []
            for r in conn.execute(
                    "SELECT p.id, p.label, p.worker_id, v.kind, p.started_at, p.finished_at, p.excluded, p.exclusion_reason, "
                    "p.released_at IS NOT NULL, p.consented_at, "
                    "(SELECT COUNT(*) FROM study_assignments a WHERE a.participant_id = p.id AND a.released_at IS NULL), "
                    "(SELECT COUNT(*) FROM study_answers x JOIN study_assignments a ON a.id = x.assignment_id WHERE a.participant_id = p.id), "
                    "(SELECT COUNT(*) FROM study_answers x JOIN study_assignments a ON a.id = x.assignment_id WHERE a.participant_id = p.id AND x.passed IS NOT NULL), "
                    "(SELECT COUNT(*) FROM study_answers x JOIN study_assignments a ON a.id = x.assignment_id WHERE a.participant_id = p.id AND x.passed = 0) "
                    "FROM study_participants p JOIN study_invitations v ON v.id = p.invitation_id WHERE p.study_id = ? ORDER BY p.id",
                    (study_id,)):
                assigned, answered = r[10], r[11]
                participants.append(ParticipantStatus(
                    participant_id=r[0], label=r[1], worker_id=r[2], invitation=r[3], started_at=r[4], finished_at=r[5],
                    assigned=assigned, answered=answered, pending=assigned - answered, checks_answered=r[12],
                    checks_failed=r[13], excluded=bool(r[6]), exclusion_reason=r[7], released=bool(r[8]), consented_at=r[9]))
            coverage, assigned = {}, {}
            for task_id, n_answers, n_assigned in conn.execute(
                    "SELECT i.task_id, (SELECT COUNT(*) FROM study_assignments a JOIN study_answers x ON x.assignment_id = a.id "
                    "WHERE a.item_id = i.id), (SELECT COUNT(*) FROM study_assignments a WHERE a.item_id = i.id AND a.released_at IS NULL) "
                    "FROM study_items i WHERE i.study_id = ? AND i.task_id IS NOT NULL ORDER BY i.position", (study_id,)):
                coverage[task_id], assigned[task_id] = n_answers, n_assigned
            invitations = conn.execute("SELECT COUNT(*) FROM study_invitations WHERE study_id = ?", (study_id,)).fetchone()[0]
        overlap = study.config.overlap
        return StudyStatus(study=study, participants=tuple(participants), coverage=coverage, assigned=assigned,
                           invitations=invitations, complete=sum(n == overlap for n in coverage.values()),
                           over=sum(n > overlap for n in coverage.values()), answers=sum(p.answered for p in participants))

    def answers(self, study_id: str, include_checks: bool = True) -> list[StudyAnswer]:
        """Every stored answer of the study, in the order stored."""
        self.study(study_id)
        rows = self._read(
            "SELECT x.submission_id, x.assignment_id, a.item_id, i.task_id, i.check_kind, p.id, p.label, x.ordering, "
            "x.cannot_decide, x.rationale, x.comment, x.passed, a.assigned_at, x.created_at FROM study_answers x "
            "JOIN study_assignments a ON a.id = x.assignment_id JOIN study_items i ON i.id = a.item_id "
            "JOIN study_participants p ON p.id = a.participant_id WHERE a.study_id = ? "
            f"{'' if include_checks else 'AND i.task_id IS NOT NULL'} ORDER BY x.id", (study_id,))
        return [StudyAnswer(submission_id=r[0], assignment_id=r[1], item_id=r[2], task_id=r[3], check_kind=r[4],
                            participant_id=r[5], annotator=r[6],
                            ordering=tuple(tuple(g) for g in json.loads(r[7])) if r[7] else (),
                            cannot_decide=bool(r[8]), rationale=None if r[9] is None else tuple(json.loads(r[9])),
                            comment=r[10], passed=None if r[11] is None else bool(r[11]), assigned_at=r[12],
                            created_at=r[13], seconds=seconds_between(r[12], r[13])) for r in rows]

    def tasks(self, study_id: str) -> dict[str, Task]:
        """The study's real tasks by id (with measure names: organiser side only)."""
        ids = [r[0] for r in self._read("SELECT task_id FROM study_items WHERE study_id = ? AND task_id IS NOT NULL "
                                        "ORDER BY position", (self.study(study_id).id,))]
        return {tid: self._task(None, tid) for tid in ids}

    def check_items(self, study_id: str) -> list[CheckItem]:
        """The study's attention-check items (organiser side)."""
        return [CheckItem(kind=r[0], task=task_from_json(r[1]), expected=json.loads(r[2]), note=r[3])
                for r in self._read("SELECT check_kind, check_task, expected, note FROM study_items WHERE study_id = ? "
                                    "AND check_kind IS NOT NULL ORDER BY position", (self.study(study_id).id,))]

    def rankings(self, study_id: str, exclude: Iterable[str] = ()) -> list[Ranking]:
        """The study's real-task rankings as store `Ranking`s (annotator = participant label), leaving out
        the annotators in `exclude`; feeds `ranking.py` and `agreement.py`."""
        excluded = set(exclude)
        return [Ranking(submission_id=a.submission_id, task_id=a.task_id, annotator=a.annotator, ordering=a.ordering,
                        cannot_decide=a.cannot_decide, created_at=a.created_at)
                for a in self.answers(study_id, include_checks=False) if a.annotator not in excluded
                and (a.ordering or a.cannot_decide)]

    def rationales(self, study_id: str, exclude: Iterable[str] = ()) -> list[Rationale]:
        """The study's real-task rationales as store `Rationale`s, leaving out the annotators in `exclude`."""
        excluded = set(exclude)
        return [Rationale(submission_id=a.submission_id, task_id=a.task_id, annotator=a.annotator, tokens=a.rationale,
                          created_at=a.created_at)
                for a in self.answers(study_id, include_checks=False) if a.annotator not in excluded and a.rationale is not None]

    def excluded(self, study_id: str) -> list[str]:
        """Labels of the annotators marked excluded."""
        return [r[0] for r in self._read("SELECT label FROM study_participants WHERE study_id = ? AND excluded = 1 "
                                         "ORDER BY id", (self.study(study_id).id,))]

    def participant_labels(self, study_id: str) -> list[str]:
        return [r[0] for r in self._read("SELECT label FROM study_participants WHERE study_id = ? ORDER BY id",
                                         (self.study(study_id).id,))]

    def raw_tables(self) -> dict[str, int]:
        """Rows per study table (diagnostics and tests)."""
        return {t: self._read(f"SELECT COUNT(*) FROM {t}")[0][0] for t in
                ("studies", "study_items", "study_invitations", "study_participants", "study_assignments", "study_answers")}
