"""Plausibility studies: many annotators, invited, each given their own tasks, every task answered by
exactly `overlap` of them, with attention checks and the answers kept through any crash.

The study lives in the annotation store's SQLite file (its tables are added next to the store's own, with
their own versioned migrations, `STUDY_MIGRATIONS` in `schema.py`); the tasks it shows are ordinary store tasks
(`engine.plausibility.tasks`), so a study's task can also be ranked on the Annotate page. Answers go to the study's
own `study_answers` table: a study annotator is not one of the store's free-form annotators. `StudyStore` reads
through `StudyReader` (`reader.py`) and adds every operation that changes a study.

The objects:
  Study            the design (model, dataset, examples, measures, tasks per annotator, overlap, attention
                   checks, instructions, consent, time limit) and its state, open or closed.
  study_items      the study's real tasks (one per example) and its attention-check items.
  invitation       a hashed token: a personal link (one annotator, resumable; optionally single-use) or the
                   one open link that takes a crowd worker's id from the URL and ends with a completion code.
  participant      one annotator in one study (a personal invitation's name, or a crowd worker's id).
  assignment       one item given to one participant, in their order; answered at most once.
  answer           the participant's ranking and/or rationale (and optional comment) for an assignment.

Concurrency and durability: every operation opens its own connection (WAL, synchronous=FULL) and writes in
one `BEGIN IMMEDIATE` transaction, so concurrent annotators (threads, Streamlit sessions, processes) queue
on the write lock: two cannot take the last slot of a task, and an answer is on disk once `submit` returns.
UNIQUE constraints back the invariants up (one assignment per participant and item, one answer per
assignment, one row per submission id).

Typical use (the dashboard does the same):

    studies = StudyStore(path)
    study = studies.create(StudyConfig(name=..., model_id=..., measures=("grad-l2", "loo-sign")), tasks)
    links = studies.invite(study.id, ["alice", "bob"])              # raw tokens, shown once
    session = studies.open_session(links[0].token)                   # the annotator opens the link
    while (a := studies.next_assignment(session)) is not None:
        studies.submit(session, a.assignment_id, ordering=[["B"], ["A"]])
"""
from __future__ import annotations

import json
import random
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import timedelta

from engine.annotation.invitations import hash_token, new_completion_code, new_token, token_matches
from engine.annotation.records import check_annotator_name, new_submission_id, normalise_ordering, utc_now
from engine.annotation.studies.checks import check_passed, check_positions, make_checks
from engine.annotation.studies.errors import (
    ParticipantReleasedError,
    StudyClosedError,
    StudyFullError,
    StudyTimeUpError,
    TokenUsedError,
    UnknownTokenError,
)
from engine.annotation.studies.reader import StudyReader
from engine.annotation.studies.records import (
    MAX_COMMENT_LENGTH,
    Assignment,
    IssuedInvitation,
    Session,
    Study,
    StudyConfig,
    annotator_task,
    config_to_json,
    parse_time,
    task_from_json,
    task_to_json,
)
from engine.annotation.studies.seats import seat_count, seat_positions
from engine.annotation.text_fields import check_text
from engine.errors import InvalidInputError, UnknownNameError
from engine.plausibility.tasks import Task


class StudyStore(StudyReader):
    """Studies in the annotation database at `path` (default: the store's default), their tables
    created and migrated on open. Every method is one short transaction; safe across threads and
    processes (make one StudyStore per process or share one: it holds no connection)."""

    # -- organiser: create, list, close -------------------------------------------------------------
    def create(self, config: StudyConfig, tasks: Sequence[Task], *, study_id: str | None = None,
               command_line: str | None = None, code_version: str | None = None, seed: int = 0) -> Study:
        """Store a study over `tasks` (one per example, e.g. from `build_study_tasks`) with its attention-check
        items, open. Tasks already in the store are reused. Returns the Study (its `completion_code` made
        here unless the config gives one). Raises InvalidInputError for a bad config or too few tasks."""
        config = config.checked()
        tasks = list(tasks)
        if not tasks:
            raise InvalidInputError("a study needs at least one task")
        if len({t.id for t in tasks}) != len(tasks):
            raise InvalidInputError("the study's tasks repeat an input: give distinct examples")
        if "ranking" in config.kinds and any(len(t.explanations) < 2 for t in tasks):
            raise InvalidInputError("every task of a ranking study needs 2+ explanations")
        if config.dataset is None and len({t.dataset for t in tasks}) == 1 and tasks[0].dataset:
            config = replace(config, dataset=tasks[0].dataset)  # provenance: the model's own dataset, named
        # three check items per check asked (as far as tasks allow): an annotator gets ones built on inputs outside
        # their own tasks where possible (see `_next_check`)
        n_items = max(config.attention_checks, min(3 * config.attention_checks, len(tasks)))
        checks = make_checks(tasks, config, n_items if config.attention_checks else 0, seed)
        if code_version is None:
            from engine.runtime import code_version as current

            code_version = current()
        study_id = study_id or "study-" + secrets.token_hex(3)
        code = config.completion_code or new_completion_code()
        with self._tx() as conn:
            if conn.execute("SELECT 1 FROM studies WHERE id = ?", (study_id,)).fetchone():
                raise InvalidInputError(f"a study {study_id!r} already exists")
            for task in tasks:
                self.annotations.insert_task(conn, task)
            conn.execute("INSERT INTO studies VALUES (?,?,?,?,?,?,?,?)",
                         (study_id, config_to_json(config), "open", code, utc_now(), None, code_version, command_line))
            for position, task in enumerate(tasks):
                conn.execute("INSERT INTO study_items (study_id, position, task_id) VALUES (?,?,?)",
                             (study_id, position, task.id))
            for offset, check in enumerate(checks):
                conn.execute("INSERT INTO study_items (study_id, position, check_kind, check_task, expected, note) "
                             "VALUES (?,?,?,?,?,?)", (study_id, len(tasks) + offset, check.kind, task_to_json(check.task),
                                                      json.dumps(check.expected), check.note))
        return self.study(study_id)

    def close(self, study_id: str) -> Study:
        """Close the study: links, tasks and answers are refused from now on (stored answers stay)."""
        with self._tx() as conn:
            self._study(conn, study_id)
            conn.execute("UPDATE studies SET state = 'closed', closed_at = COALESCE(closed_at, ?) WHERE id = ?",
                         (utc_now(), study_id))
        return self.study(study_id)

    def reopen(self, study_id: str) -> Study:
        """Open a closed study again (the same links work again)."""
        with self._tx() as conn:
            self._study(conn, study_id)
            conn.execute("UPDATE studies SET state = 'open', closed_at = NULL WHERE id = ?", (study_id,))
        return self.study(study_id)

    # -- organiser: invitations ---------------------------------------------------------------------
    def invite(self, study_id: str, names: Iterable[str], *, single_use: bool = False) -> list[IssuedInvitation]:
        """A personal link per name (names stored verbatim, distinct within the study). The returned raw
        tokens are the only copy: only their SHA-256 is stored. single_use: the link opens one session
        only (a second opening is refused); otherwise the annotator can reopen it to resume."""
        names = [check_annotator_name(n) for n in names]
        if len(set(names)) != len(names):
            raise InvalidInputError("the names repeat: each annotator needs a distinct name")
        issued = []
        with self._tx() as conn:
            study = self._study(conn, study_id)
            if study.state != "open":
                raise StudyClosedError(f"study {study_id!r} is closed: reopen it before inviting")
            taken = {r[0] for r in conn.execute("SELECT label FROM study_invitations WHERE study_id = ? AND kind = 'personal' "
                                                "UNION SELECT label FROM study_participants WHERE study_id = ?",
                                                (study_id, study_id))}
            clash = [n for n in names if n in taken]
            if clash:
                raise InvalidInputError(f"already invited or taking part in {study_id!r}: {clash[:5]}")
            for name in names:
                token = new_token()
                conn.execute("INSERT INTO study_invitations (study_id, token_hash, kind, label, single_use, created_at) "
                             "VALUES (?,?,?,?,?,?)", (study_id, hash_token(token), "personal", name, int(single_use), utc_now()))
                issued.append(IssuedInvitation(study_id, name, token, "personal", single_use))
        return issued

    def open_link(self, study_id: str) -> IssuedInvitation:
        """A new open link for crowd workers (any earlier open link of the study is revoked: its token
        cannot be shown again, since only its hash is kept). Workers' ids come from the URL's `worker_param`."""
        with self._tx() as conn:
            study = self._study(conn, study_id)
            if study.state != "open":
                raise StudyClosedError(f"study {study_id!r} is closed: reopen it before making a link")
            now = utc_now()
            conn.execute("UPDATE study_invitations SET revoked_at = ? WHERE study_id = ? AND kind = 'open' "
                         "AND revoked_at IS NULL", (now, study_id))
            token = new_token()
            conn.execute("INSERT INTO study_invitations (study_id, token_hash, kind, label, single_use, created_at) "
                         "VALUES (?,?,?,?,?,?)", (study_id, hash_token(token), "open", None, 0, now))
        return IssuedInvitation(study_id, "open link", token, "open", False, study.config.worker_param)

    def revoke(self, study_id: str, label: str) -> None:
        """Revoke the personal link of `label` (their answers stay; the link is refused from now on)."""
        with self._tx() as conn:
            self._study(conn, study_id)
            cur = conn.execute("UPDATE study_invitations SET revoked_at = ? WHERE study_id = ? AND label = ? "
                               "AND revoked_at IS NULL", (utc_now(), study_id, label))
            if not cur.rowcount:
                raise InvalidInputError(f"no active personal link for {label!r} in {study_id!r}")

    # -- annotator: sessions ------------------------------------------------------------------------
    def open_session(self, token: str, worker_id: str | None = None) -> Session:
        """Admit the holder of `token` (a crowd worker also gives `worker_id`, from the URL).

        The same personal link, or the open link with the same worker id, returns the same participant
        (they resume where they left off). Raises UnknownTokenError (no such link), TokenUsedError
        (single-use link opened before, or revoked), StudyClosedError, ParticipantReleasedError, or
        InvalidInputError (open link without a worker id); nothing about the study is returned then."""
        if not isinstance(token, str) or not token or len(token) > 200:
            raise UnknownTokenError("this study link is not valid: check that it was copied whole, or ask the "
                                    "study's organiser for a new one")
        digest = hash_token(token)
        with self._tx() as conn:
            row = conn.execute("SELECT id, study_id, token_hash, kind, label, single_use, redeemed_at, revoked_at "
                               "FROM study_invitations WHERE token_hash = ?", (digest,)).fetchone()
            if row is None or not token_matches(token, row[2]):
                raise UnknownTokenError("this study link is not valid: check that it was copied whole, or ask the "
                                        "study's organiser for a new one")
            invitation_id, study_id, _, kind, label, single_use, redeemed_at, revoked_at = row
            study = self._study(conn, study_id)
            if revoked_at is not None:
                raise TokenUsedError("this study link was withdrawn by the organiser; ask them for a new one")
            if study.state != "open":
                raise StudyClosedError("this study is closed; thank you for your interest")
            now = utc_now()
            if kind == "open":
                if not isinstance(worker_id, str) or not worker_id.strip():
                    raise InvalidInputError(f"this open study link needs your worker id in the address "
                                            f"(…&{study.config.worker_param}=YOUR_ID); open it from the recruiting platform")
                worker_id = check_annotator_name(worker_id)
                found = conn.execute("SELECT id FROM study_participants WHERE study_id = ? AND worker_id = ?",
                                     (study_id, worker_id)).fetchone()
                if found is None:
                    if conn.execute("SELECT 1 FROM study_participants WHERE study_id = ? AND label = ?",
                                    (study_id, worker_id)).fetchone() or conn.execute(
                            "SELECT 1 FROM study_invitations WHERE study_id = ? AND label = ?", (study_id, worker_id)).fetchone():
                        raise InvalidInputError("this worker id is already used by an invited annotator of this study; "
                                                "contact the organiser")
                    participant_id = self._join(conn, study, invitation_id, worker_id, worker_id, now)
                else:
                    participant_id = found[0]
            else:
                if single_use and redeemed_at is not None:
                    raise TokenUsedError("this single-use study link has already been opened; ask the organiser for a new one")
                found = conn.execute("SELECT id FROM study_participants WHERE invitation_id = ?", (invitation_id,)).fetchone()
                if found is None:
                    participant_id = self._join(conn, study, invitation_id, label, None, now)
                else:
                    participant_id = found[0]
            conn.execute("UPDATE study_invitations SET redeemed_at = COALESCE(redeemed_at, ?) WHERE id = ?", (now, invitation_id))
            released = conn.execute("SELECT released_at FROM study_participants WHERE id = ?", (participant_id,)).fetchone()[0]
            if released is not None:
                raise ParticipantReleasedError("the organiser has ended your part in this study; thank you")
            return self._session(conn, study, participant_id)

    def _join(self, conn, study: Study, invitation_id: int, label: str, worker_id: str | None, now: str) -> int:
        """A new participant holding the lowest free seat (StudyFullError when none: nothing is written)."""
        self._release_expired(conn, study, now)
        taken = {r[0] for r in conn.execute("SELECT seat FROM study_participants WHERE study_id = ? AND released_at IS NULL "
                                            "AND seat IS NOT NULL", (study.id,))}
        c = study.config
        for seat in range(seat_count(study.n_tasks, c.overlap, c.tasks_per_annotator)):
            if seat in taken:
                continue
            if self._seat_remaining(conn, study, seat):
                break
        else:
            raise StudyFullError("every place in this study is taken; thank you for your interest (a place may free "
                                 "up later if someone leaves)")
        cur = conn.execute("INSERT INTO study_participants (study_id, invitation_id, label, worker_id, started_at, seat) "
                           "VALUES (?,?,?,?,?,?)", (study.id, invitation_id, label, worker_id, now, seat))
        return cur.lastrowid

    def _seat_remaining(self, conn, study: Study, seat: int) -> list[int]:
        """Item ids of the seat's tasks not yet answered nor held under that seat (by anyone), seat order."""
        c = study.config
        positions = seat_positions(seat, study.n_tasks, c.overlap, c.tasks_per_annotator)
        items = dict(conn.execute("SELECT position, id FROM study_items WHERE study_id = ? AND task_id IS NOT NULL",
                                  (study.id,)).fetchall())
        used = {r[0] for r in conn.execute(
            "SELECT a.item_id FROM study_assignments a WHERE a.study_id = ? AND a.seat = ? AND (a.released_at IS NULL OR "
            "EXISTS (SELECT 1 FROM study_answers x WHERE x.assignment_id = a.id))", (study.id, seat))}
        return [items[p] for p in positions if items[p] not in used]

    def record_consent(self, session: Session) -> str:
        """Record that the annotator accepted the consent text (the first time only); returns that time.
        Exported with the participant; the engine does not enforce it (the annotator's page asks first)."""
        with self._tx() as conn:
            self._admit(conn, session)
            conn.execute("UPDATE study_participants SET consented_at = COALESCE(consented_at, ?) WHERE id = ?",
                         (utc_now(), session.participant_id))
            return conn.execute("SELECT consented_at FROM study_participants WHERE id = ?", (session.participant_id,)).fetchone()[0]

    def _admit(self, conn, session: Session) -> Study:
        """Re-check, inside a transaction, that this session may still work (raises otherwise)."""
        study = self._study(conn, session.study_id)
        if study.state != "open":
            raise StudyClosedError("this study is closed; your answers so far are kept. Thank you")
        row = conn.execute("SELECT released_at, finished_at FROM study_participants WHERE id = ? AND study_id = ?",
                           (session.participant_id, session.study_id)).fetchone()
        if row is None:
            raise UnknownTokenError("this session does not belong to the study")
        if row[0] is not None:
            raise ParticipantReleasedError("your part in this study has ended (time limit or the organiser); "
                                           "your answers so far are kept. Thank you")
        return study

    @staticmethod
    def _time_up(session: Session, now: str) -> bool:
        return session.deadline is not None and now > session.deadline

    def _release(self, conn, participant_id: int, now: str) -> None:
        conn.execute("UPDATE study_participants SET released_at = COALESCE(released_at, ?) WHERE id = ?", (now, participant_id))
        conn.execute("UPDATE study_assignments SET released_at = ? WHERE participant_id = ? AND released_at IS NULL "
                     "AND id NOT IN (SELECT assignment_id FROM study_answers)", (now, participant_id))

    def _release_expired(self, conn, study: Study, now: str) -> None:
        """Give back the unanswered items of participants whose time limit has passed."""
        if study.config.time_limit_minutes is None:
            return
        limit = timedelta(minutes=study.config.time_limit_minutes)
        for pid, started in conn.execute("SELECT id, started_at FROM study_participants WHERE study_id = ? AND "
                                         "released_at IS NULL AND finished_at IS NULL", (study.id,)).fetchall():
            if parse_time(started) + limit < parse_time(now):
                self._release(conn, pid, now)

    # -- annotator: tasks and answers ----------------------------------------------------------------
    def next_assignment(self, session: Session) -> Assignment | None:
        """The annotator's current item: an unanswered one they were given (resume), else a new one taken
        atomically (a real task with fewer than `overlap` holders that they have not had, least-covered
        first; or an attention check at their check positions). None when they are done (the finish time is
        recorded). Raises StudyClosedError, StudyTimeUpError (their unanswered item goes back to the pool),
        ParticipantReleasedError."""
        def take(conn, study: Study, now: str) -> Assignment | None:
            self._release_expired(conn, study, now)
            return self._next(conn, study, session, now)

        return self._in_time(session, take, "your time for this study is up; your answers so far are kept. Thank you")

    def _in_time(self, session: Session, work, time_up: str):
        """`work(conn, study, now)`'s result, run in one transaction for an admitted annotator whose time is not up.
        When it is up, their unanswered item goes back to the pool and StudyTimeUpError(`time_up`) is raised after
        the commit (the release must stick)."""
        timed_out = False
        with self._tx() as conn:
            study = self._admit(conn, session)
            now = utc_now()
            if self._time_up(session, now):
                self._release(conn, session.participant_id, now)
                timed_out = True
            else:
                result = work(conn, study, now)
        if timed_out:
            raise StudyTimeUpError(time_up)
        return result

    def _next(self, conn, study: Study, session: Session, now: str) -> Assignment | None:
        pid = session.participant_id
        pending = conn.execute(
            "SELECT a.id FROM study_assignments a WHERE a.participant_id = ? AND a.released_at IS NULL AND NOT EXISTS "
            "(SELECT 1 FROM study_answers x WHERE x.assignment_id = a.id) ORDER BY a.sequence LIMIT 1", (pid,)).fetchone()
        if pending is not None:
            return self._assignment(conn, study, pending[0])
        finished = conn.execute("SELECT finished_at FROM study_participants WHERE id = ?", (pid,)).fetchone()[0]
        if finished is not None:
            return None
        n_real = min(study.config.tasks_per_annotator, study.n_tasks)
        rows = conn.execute("SELECT i.check_kind IS NOT NULL FROM study_assignments a JOIN study_items i ON i.id = a.item_id "
                            "WHERE a.participant_id = ?", (pid,)).fetchall()
        sequence = len(rows) + 1
        real_given = sum(1 for (is_check,) in rows if not is_check)
        checks_given = len(rows) - real_given
        item_id = None
        if sequence in check_positions(pid, n_real, study.config.attention_checks) and checks_given < study.config.attention_checks:
            item_id = self._next_check(conn, study, pid)
        if item_id is None and real_given < n_real:
            item_id = self._next_real(conn, study, pid)
        if item_id is None:
            # their seat is done (or was shorter); checks still owed come after
            if study.config.attention_checks - checks_given > 0 and real_given > 0:
                item_id = self._next_check(conn, study, pid)
        if item_id is None:
            conn.execute("UPDATE study_participants SET finished_at = ? WHERE id = ?", (now, pid))
            return None
        seat = conn.execute("SELECT seat FROM study_participants WHERE id = ?", (pid,)).fetchone()[0]
        is_check = conn.execute("SELECT check_kind IS NOT NULL FROM study_items WHERE id = ?", (item_id,)).fetchone()[0]
        cur = conn.execute("INSERT INTO study_assignments (study_id, participant_id, item_id, seat, sequence, assigned_at) "
                           "VALUES (?,?,?,?,?,?)", (study.id, pid, item_id, None if is_check else seat, sequence, now))
        return self._assignment(conn, study, cur.lastrowid)

    def _next_check(self, conn, study: Study, pid: int) -> int | None:
        """An attention-check item this participant has not had, preferably built on an input outside their
        seat (so they do not meet a text twice), starting at a place rotated by participant."""
        checks = [(r[0], json.loads(r[1])["id"]) for r in conn.execute(
            "SELECT id, check_task FROM study_items WHERE study_id = ? AND check_kind IS NOT NULL ORDER BY position",
            (study.id,))]
        if not checks:
            return None
        given = {r[0] for r in conn.execute("SELECT item_id FROM study_assignments WHERE participant_id = ?", (pid,))}
        seat = conn.execute("SELECT seat FROM study_participants WHERE id = ?", (pid,)).fetchone()[0]
        c = study.config
        positions = seat_positions(seat, study.n_tasks, c.overlap, c.tasks_per_annotator) if seat is not None else []
        by_position = dict(conn.execute("SELECT position, task_id FROM study_items WHERE study_id = ? AND task_id IS NOT NULL",
                                        (study.id,)).fetchall())
        own = {by_position[p] for p in positions}
        start = pid % len(checks)
        fresh = [c for c in checks[start:] + checks[:start] if c[0] not in given]
        if not fresh:
            return None
        return next((item for item, base in fresh if base not in own), fresh[0][0])

    def _next_real(self, conn, study: Study, pid: int) -> int | None:
        """The participant's next real task: one of their seat's remaining tasks, in an order shuffled per
        participant (so that position effects average out across annotators)."""
        seat = conn.execute("SELECT seat FROM study_participants WHERE id = ?", (pid,)).fetchone()[0]
        if seat is None:
            return None
        remaining = self._seat_remaining(conn, study, seat)
        if not remaining:
            return None
        random.Random(f"order:{pid}").shuffle(remaining)
        return remaining[0]

    def _assignment(self, conn, study: Study, assignment_id: int) -> Assignment:
        sequence, task_id, check_task, note = conn.execute(
            "SELECT a.sequence, i.task_id, i.check_task, i.note FROM study_assignments a JOIN study_items i ON i.id = a.item_id "
            "WHERE a.id = ?", (assignment_id,)).fetchone()
        task = task_from_json(check_task) if task_id is None else self._task(conn, task_id)
        pid = conn.execute("SELECT participant_id FROM study_assignments WHERE id = ?", (assignment_id,)).fetchone()[0]
        return Assignment(assignment_id=assignment_id, sequence=sequence, total=self._total(conn, study, pid),
                          kinds=study.config.kinds, task=annotator_task(task), note=note)

    def submit(self, session: Session, assignment_id: int, *, ordering: Sequence[Sequence[str] | str] = (),
               cannot_decide: bool = False, rationale: Iterable[int] | None = None, comment: str | None = None,
               submission_id: str | None = None) -> bool:
        """Store the annotator's answer to one of their assignments, durably, in one transaction.

        Args:
            ordering: groups of slots best first (a group is a tie), each slot of the item exactly once;
                required in a ranking study unless `cannot_decide`.
            rationale: marked token indices; required in a rationale study (may be empty).
            comment: optional free text (stored verbatim, at most 5000 characters).
            submission_id: the client's id for this submission (a retry with the same id and content stores
                nothing and returns False).
        Returns True when stored, False for a retry already stored.
        Raises InvalidInputError (not their assignment, already answered, a malformed answer),
        StudyClosedError, StudyTimeUpError, ParticipantReleasedError; nothing is written then."""
        if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_COMMENT_LENGTH):
            raise InvalidInputError(f"a comment is text of at most {MAX_COMMENT_LENGTH} characters")
        if comment is not None:
            check_text(comment, "the comment", multiline=True)
        groups = () if cannot_decide else normalise_ordering(ordering) if ordering else ()
        marks = None if rationale is None else sorted({int(t) for t in rationale})
        submission_id = submission_id or new_submission_id()
        return self._in_time(session, lambda conn, study, now: self._store_answer(
            conn, study, session, assignment_id, groups, bool(cannot_decide), marks, comment, submission_id, now),
            "your time for this study is up: this last answer could not be kept; your earlier answers are. Thank you")

    def _store_answer(self, conn, study, session, assignment_id, groups, cannot_decide, marks, comment, submission_id,
                      now) -> bool:
        row = conn.execute("SELECT a.participant_id, a.released_at, i.task_id, i.check_task, i.expected "
                           "FROM study_assignments a JOIN study_items i ON i.id = a.item_id WHERE a.id = ? AND a.study_id = ?",
                           (assignment_id, study.id)).fetchone()
        if row is None or row[0] != session.participant_id:
            raise InvalidInputError(f"task {assignment_id} is not one of yours in this study")
        ordering_json = json.dumps([list(g) for g in groups]) if (groups or cannot_decide or "ranking" in study.config.kinds) else None
        rationale_json = None if marks is None else json.dumps(marks)
        previous = conn.execute("SELECT submission_id, ordering, cannot_decide, rationale, comment FROM study_answers "
                                "WHERE assignment_id = ? OR submission_id = ?", (assignment_id, submission_id)).fetchone()
        if previous is not None:
            if previous == (submission_id, ordering_json, int(cannot_decide), rationale_json, comment):
                return False  # the same submission again (double click, retry after a lost reply)
            raise InvalidInputError("this task was already answered; answers cannot be changed")
        if row[1] is not None:
            raise InvalidInputError("this task was given back to the pool (time limit); it can no longer be answered")
        task = task_from_json(row[3]) if row[2] is None else self._task(conn, row[2])
        if "ranking" in study.config.kinds:
            if not cannot_decide:
                given = [s for g in groups for s in g]
                if sorted(given) != sorted(task.slots):
                    raise InvalidInputError(f"a ranking must place every explanation ({', '.join(sorted(task.slots))}) "
                                            f"exactly once; got {', '.join(given) or 'none'}")
        elif groups or cannot_decide:
            raise InvalidInputError("this study asks for rationales only, not rankings")
        if "rationale" in study.config.kinds:
            if marks is None:
                raise InvalidInputError("mark the words that justify the decision (or submit an empty selection)")
            bad = [t for t in marks if not 0 <= t < len(task.tokens)]
            if bad:
                raise InvalidInputError(f"token indices {bad} are outside the task's {len(task.tokens)} tokens")
        elif marks is not None:
            raise InvalidInputError("this study asks for rankings only, not rationales")
        passed = None
        if row[2] is None:
            passed = int(check_passed(json.loads(row[4]), groups, cannot_decide, marks))
        conn.execute("INSERT INTO study_answers (submission_id, assignment_id, ordering, cannot_decide, rationale, comment, "
                     "passed, created_at) VALUES (?,?,?,?,?,?,?,?)",
                     (submission_id, assignment_id, ordering_json, int(cannot_decide), rationale_json, comment, passed, now))
        return True

    def set_excluded(self, study_id: str, label: str, excluded: bool = True, reason: str | None = None) -> None:
        """Mark an annotator excluded from (or back into) the results; their answers stay stored."""
        with self._tx() as conn:
            self._study(conn, study_id)
            cur = conn.execute("UPDATE study_participants SET excluded = ?, exclusion_reason = ? WHERE study_id = ? AND label = ?",
                               (int(excluded), reason if excluded else None, study_id, label))
            if not cur.rowcount:
                known = [r[0] for r in conn.execute("SELECT label FROM study_participants WHERE study_id = ?", (study_id,))]
                raise UnknownNameError(f"no annotator {label!r} in {study_id!r}; annotators: {known[:20]}")

    def release(self, study_id: str, label: str) -> None:
        """End an annotator's part (e.g. a no-show): their unanswered items go back to the pool for others."""
        with self._tx() as conn:
            self._study(conn, study_id)
            row = conn.execute("SELECT id FROM study_participants WHERE study_id = ? AND label = ?", (study_id, label)).fetchone()
            if row is None:
                raise UnknownNameError(f"no annotator {label!r} in {study_id!r}")
            self._release(conn, row[0], utc_now())
