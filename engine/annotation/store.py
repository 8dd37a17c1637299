"""The annotation store: one SQLite file holding annotators, annotation tasks (an input with the
explanations shown and their provenance), rankings and rationale highlights.

Why SQLite and how it is kept safe:
- WAL journal and `synchronous=FULL`: readers never block the writer, and a committed submission
  survives a crash of the process that wrote it (and of the machine).
- One short transaction per submission (`BEGIN IMMEDIATE`: the write lock is taken up front, so two
  writers queue on the busy timeout instead of failing on a lock upgrade).
- Idempotent submissions: each carries a client-generated id under a UNIQUE constraint, so a
  double-clicked or retried submission is stored once.
- A connection per operation: nothing is shared between threads (Streamlit sessions) or processes.
- The schema is versioned (`PRAGMA user_version`, with each step logged in `schema_history`) and
  upgraded by the ordered `MIGRATIONS` (`engine/annotation/schema.py`); a file written by a newer version is
  refused, not touched.
- Every SQLite failure a user can cause (the file is locked, read-only, not a database, in a folder
  that cannot be made) becomes one `AnnotationStoreError` with a one-line message; nothing is written
  when it is raised.

Token indices in rankings and rationales count the task's `tokens`: the primary sequence's maskable
tokens, in order (the same positions as each explanation's `scores`).
"""
from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from engine.annotation.records import (
    KINDS,
    Ranking,
    Rationale,
    check_annotator_name,
    new_submission_id,
    normalise_ordering,
    utc_now,
)
from engine.annotation.schema import SCHEMA_VERSION, migrate
from engine.errors import AnnotationStoreError, InvalidInputError
from engine.plausibility.tasks import AnonymisedExplanation, Task


def default_db_path() -> Path:
    """`annotations/annotations.sqlite3` under the project root; `ENGINE_ANNOTATIONS_DB` overrides."""
    import engine.settings as settings

    return settings.annotations_db_path()


class AnnotationStore:
    """The annotation database at `path` (default: `default_db_path()`), created and migrated on open.

    busy_timeout: seconds a write waits for another writer before `AnnotationStoreError` (locked).
    read_only: open without ever writing (submissions then raise `AnnotationStoreError`).

    Two levels, both public. The operations (`add_tasks`, `submit_ranking`, `tasks`, ...) each run in one
    transaction of their own. The connection level (`connect`, `transaction`, `query`, and `insert_task`,
    `insert_ranking`, `insert_rationale`, `task_slots`, `task_size`, which take an open connection) is for code
    that extends this database with tables of its own (engine.annotation.studies) or copies records in and out
    (engine.annotation.io) and needs its writes and the store's in one transaction. The connection-level writes
    check nothing the operations check (annotator names, slot coverage, token ranges): the caller does.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, busy_timeout: float = 10.0, read_only: bool = False):
        self.path = Path(path).expanduser() if path is not None else default_db_path()
        self.busy_timeout = float(busy_timeout)
        self.read_only = bool(read_only)
        if self.path.is_dir():
            raise AnnotationStoreError(f"the annotation database path {self.path} is a folder, not a file")
        if not self.read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise AnnotationStoreError(f"cannot create the folder {self.path.parent} for the annotation "
                                           f"database: {err.strerror or err}") from None
        elif not self.path.is_file():
            raise AnnotationStoreError(f"the annotation database {self.path} does not exist")
        with self.connect() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if self.read_only:
                if version != SCHEMA_VERSION:
                    raise AnnotationStoreError(f"the annotation database {self.path} has schema version {version}, "
                                               f"not {SCHEMA_VERSION}; open it writable once to upgrade it")
            else:
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                migrate(conn)
            self.schema_version = SCHEMA_VERSION

    def __repr__(self) -> str:
        return f"AnnotationStore({str(self.path)!r})"

    # -- the connection level: connections, errors, reads ------------------------------------------
    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A fresh connection (autocommit: each statement its own transaction unless `BEGIN` is issued; foreign
        keys on), closed on exit, with every SQLite error a user can cause turned into AnnotationStoreError."""
        conn = None
        try:
            uri = self.path.absolute().as_uri() + ("?mode=ro" if self.read_only else "?mode=rwc")
            conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout, isolation_level=None)
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA synchronous=FULL")
            yield conn
        except sqlite3.Error as err:
            raise self._clear_error(err) from None
        finally:
            if conn is not None:
                conn.close()

    def _clear_error(self, err: sqlite3.Error) -> Exception:
        text = str(err).lower()
        where = f"the annotation database {self.path}"
        if isinstance(err, sqlite3.IntegrityError):
            return ValueError(f"rejected by {where}: {err}")
        if "locked" in text or "busy" in text:
            return AnnotationStoreError(f"{where} is locked by another program (waited {self.busy_timeout:g} s); "
                                        "nothing was written: close the other program or try again")
        if "readonly" in text or "read-only" in text or "read only" in text:
            return AnnotationStoreError(f"{where} is read-only; nothing was written: make it writable or point "
                                        "ENGINE_ANNOTATIONS_DB at a writable file")
        if "not a database" in text or "malformed" in text or "encrypted" in text:
            return AnnotationStoreError(f"{where} is not an SQLite database (or is damaged) and was left untouched: "
                                        "move it away or point ENGINE_ANNOTATIONS_DB elsewhere")
        if "unable to open" in text:
            return AnnotationStoreError(f"cannot open {where}: the folder is missing or not writable")
        if "disk" in text and ("full" in text or "i/o" in text):
            return AnnotationStoreError(f"{where} could not be written ({err}); the last submission was not stored")
        return AnnotationStoreError(f"{where} failed: {err}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: everything inside commits together or not at all."""
        with self.connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """The rows of one read statement `sql` with `params`, on a connection of its own."""
        with self.connect() as conn:
            return conn.execute(sql, params).fetchall()

    # -- writing ------------------------------------------------------------------------------------
    @staticmethod
    def _annotator_id(conn: sqlite3.Connection, name: str) -> int:
        conn.execute("INSERT OR IGNORE INTO annotators (name, created_at) VALUES (?, ?)", (name, utc_now()))
        return conn.execute("SELECT id FROM annotators WHERE name = ?", (name,)).fetchone()[0]

    def add_annotator(self, name: str) -> None:
        name = check_annotator_name(name)
        with self.transaction() as conn:
            self._annotator_id(conn, name)

    def add_tasks(self, tasks: Iterable[Task]) -> int:
        """Store tasks (one transaction); a task whose id is already stored is kept as it was.
        Returns how many were new."""
        new = 0
        with self.transaction() as conn:
            for task in tasks:
                new += self.insert_task(conn, task)
        return new

    @staticmethod
    def insert_task(conn: sqlite3.Connection, task: Task) -> int:
        """Write `task` and its explanations on the open connection `conn`; 0 (nothing written) when its id is
        already stored, else 1."""
        cur = conn.execute(
            "INSERT OR IGNORE INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (task.id, task.model_id, task.dataset, task.example_uid, task.primary, task.auxiliary, task.label,
             task.label_name, task.target, task.target_name, task.target_source, json.dumps(list(task.tokens)),
             None if task.gold_rationale is None else json.dumps(list(task.gold_rationale)), task.seed,
             task.code_version, task.created_at or utc_now()))
        if cur.rowcount == 0:
            return 0
        conn.executemany(
            "INSERT INTO explanations VALUES (?,?,?,?,?,?,?,?)",
            [(task.id, e.slot, e.measure, json.dumps(e.options, sort_keys=True, default=str), e.target,
              e.target_source, e.code_version, json.dumps([float(s) for s in e.scores])) for e in task.explanations])
        return 1

    def submit_ranking(self, task_id: str, annotator: str, ordering: Sequence[Sequence[str] | str] = (),
                       cannot_decide: bool = False, submission_id: str | None = None,
                       created_at: str | None = None) -> bool:
        """Store one ranking in one transaction. `ordering`: groups of slots best first (ties in a
        group), covering every slot of the task exactly once, or empty with `cannot_decide`.
        Returns False when this `submission_id` was already stored (nothing is written twice)."""
        annotator = check_annotator_name(annotator)
        groups = () if cannot_decide else normalise_ordering(ordering)
        submission_id = submission_id or new_submission_id()
        with self.transaction() as conn:
            slots = self.task_slots(conn, task_id)
            if not cannot_decide:
                given = [s for g in groups for s in g]
                if sorted(given) != sorted(slots):
                    raise InvalidInputError(f"a ranking must place every explanation ({', '.join(sorted(slots))}) exactly once; "
                                     f"got {', '.join(given) or 'none'}")
            return self.insert_ranking(conn, submission_id, task_id, annotator, groups, cannot_decide, created_at)

    def insert_ranking(self, conn, submission_id, task_id, annotator, groups, cannot_decide, created_at) -> bool:
        """Write one ranking (`groups`: slots best first, already checked) on `conn`. False when `submission_id` is
        stored with the same content; InvalidInputError when with other content."""
        annotator_id = self._annotator_id(conn, annotator)
        ordering = json.dumps([list(g) for g in groups])
        cur = conn.execute(
            "INSERT OR IGNORE INTO rankings (submission_id, task_id, annotator_id, ordering, cannot_decide, created_at) "
            "VALUES (?,?,?,?,?,?)", (submission_id, task_id, annotator_id, ordering, int(bool(cannot_decide)),
                                     created_at or utc_now()))
        if cur.rowcount:
            return True
        stored = conn.execute("SELECT task_id, annotator_id, ordering, cannot_decide FROM rankings WHERE submission_id = ?",
                              (submission_id,)).fetchone()
        if tuple(stored) != (task_id, annotator_id, ordering, int(bool(cannot_decide))):
            raise InvalidInputError(f"submission {submission_id} was already stored with other content; not overwritten")
        return False

    def submit_rationale(self, task_id: str, annotator: str, tokens: Iterable[int], submission_id: str | None = None,
                         created_at: str | None = None) -> bool:
        """Store the token indices an annotator marked (one transaction). Returns False for a
        `submission_id` already stored."""
        annotator = check_annotator_name(annotator)
        selected = sorted({int(t) for t in tokens})
        submission_id = submission_id or new_submission_id()
        with self.transaction() as conn:
            n_tokens = self.task_size(conn, task_id)
            bad = [t for t in selected if not 0 <= t < n_tokens]
            if bad:
                raise InvalidInputError(f"token indices {bad} are outside the task's {n_tokens} tokens")
            return self.insert_rationale(conn, submission_id, task_id, annotator, selected, created_at)

    def insert_rationale(self, conn, submission_id, task_id, annotator, selected, created_at) -> bool:
        """Write one rationale (`selected`: sorted token indices, already checked) on `conn`; False and
        InvalidInputError as for `insert_ranking`."""
        annotator_id = self._annotator_id(conn, annotator)
        tokens = json.dumps(list(selected))
        cur = conn.execute(
            "INSERT OR IGNORE INTO rationales (submission_id, task_id, annotator_id, tokens, created_at) VALUES (?,?,?,?,?)",
            (submission_id, task_id, annotator_id, tokens, created_at or utc_now()))
        if cur.rowcount:
            return True
        stored = conn.execute("SELECT task_id, annotator_id, tokens FROM rationales WHERE submission_id = ?",
                              (submission_id,)).fetchone()
        if tuple(stored) != (task_id, annotator_id, tokens):
            raise InvalidInputError(f"submission {submission_id} was already stored with other content; not overwritten")
        return False

    @staticmethod
    def task_slots(conn, task_id: str) -> list[str]:
        """The explanation slots of a stored task, sorted; InvalidInputError for an unknown task."""
        if conn.execute("SELECT 1 FROM tasks WHERE id = ?", (task_id,)).fetchone() is None:
            raise InvalidInputError(f"unknown task {task_id!r}")
        return [r[0] for r in conn.execute("SELECT slot FROM explanations WHERE task_id = ? ORDER BY slot", (task_id,))]

    @staticmethod
    def task_size(conn, task_id: str) -> int:
        """How many tokens a stored task has; InvalidInputError for an unknown task."""
        row = conn.execute("SELECT tokens FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None:
            raise InvalidInputError(f"unknown task {task_id!r}")
        return len(json.loads(row[0]))

    # -- reading ------------------------------------------------------------------------------------
    def _tasks_where(self, where: str, params: Sequence) -> list[Task]:
        with self.connect() as conn:
            rows = conn.execute(f"SELECT * FROM tasks {where} ORDER BY created_at, id", params).fetchall()
            explanations: dict[str, list[AnonymisedExplanation]] = {}
            ids = [r[0] for r in rows]
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                for r in conn.execute(
                        f"SELECT task_id, slot, measure, options, target, target_source, code_version, scores "
                        f"FROM explanations WHERE task_id IN ({','.join('?' * len(chunk))}) ORDER BY task_id, slot", chunk):
                    explanations.setdefault(r[0], []).append(AnonymisedExplanation(
                        slot=r[1], measure=r[2], options=json.loads(r[3]), target=r[4], target_source=r[5],
                        code_version=r[6], scores=tuple(json.loads(r[7]))))
        return [Task(id=r[0], model_id=r[1], dataset=r[2], example_uid=r[3], primary=r[4], auxiliary=r[5], label=r[6],
                     label_name=r[7], target=r[8], target_name=r[9], target_source=r[10], tokens=tuple(json.loads(r[11])),
                     gold_rationale=None if r[12] is None else tuple(json.loads(r[12])), seed=r[13], code_version=r[14],
                     created_at=r[15], explanations=tuple(explanations.get(r[0], ())))
                for r in rows]

    def task(self, task_id: str) -> Task:
        found = self._tasks_where("WHERE id = ?", (task_id,))
        if not found:
            raise InvalidInputError(f"unknown task {task_id!r}")
        return found[0]

    def tasks(self, model_id: str | None = None) -> list[Task]:
        """Tasks in the order they were made (optionally of one model)."""
        return self._tasks_where("WHERE model_id = ?", (model_id,)) if model_id else self._tasks_where("", ())

    def task_count(self, model_id: str | None = None) -> int:
        if model_id:
            return self.query("SELECT COUNT(*) FROM tasks WHERE model_id = ?", (model_id,))[0][0]
        return self.query("SELECT COUNT(*) FROM tasks")[0][0]

    def model_ids(self) -> list[str]:
        return [r[0] for r in self.query("SELECT DISTINCT model_id FROM tasks ORDER BY model_id")]

    def next_task(self, model_id: str, annotator: str, kind: str) -> Task | None:
        """The first task of `model_id` (in the order made) this annotator has not yet submitted a
        `kind` ('ranking' or 'rationale') for; None when all are done. A ranking task needs at least
        two explanations."""
        if kind not in KINDS:
            raise InvalidInputError(f"kind must be one of {KINDS}, got {kind!r}")
        table = "rankings" if kind == "ranking" else "rationales"
        need = "AND (SELECT COUNT(*) FROM explanations e WHERE e.task_id = t.id) >= 2" if kind == "ranking" else ""
        rows = self.query(
            f"SELECT t.id FROM tasks t WHERE t.model_id = ? {need} AND NOT EXISTS ("
            f"  SELECT 1 FROM {table} x JOIN annotators a ON a.id = x.annotator_id"
            f"  WHERE x.task_id = t.id AND a.name = ?) ORDER BY t.created_at, t.id LIMIT 1", (model_id, annotator))
        return self.task(rows[0][0]) if rows else None

    def progress(self, model_id: str, annotator: str, kind: str) -> tuple[int, int]:
        """(tasks done by this annotator, tasks in all) for one model and kind."""
        table = "rankings" if kind == "ranking" else "rationales"
        total = self.query("SELECT COUNT(*) FROM tasks WHERE model_id = ?", (model_id,))[0][0]
        done = self.query(f"SELECT COUNT(DISTINCT x.task_id) FROM {table} x JOIN annotators a ON a.id = x.annotator_id "
                          "JOIN tasks t ON t.id = x.task_id WHERE t.model_id = ? AND a.name = ?", (model_id, annotator))[0][0]
        return done, total

    def annotators(self) -> list[str]:
        return [r[0] for r in self.query("SELECT name FROM annotators ORDER BY id")]

    def rankings(self, model_id: str | None = None, latest_only: bool = True) -> list[Ranking]:
        """Rankings in the order submitted; `latest_only` keeps each annotator's last one per task."""
        return [Ranking(submission_id=r[0], task_id=r[1], annotator=r[2],
                        ordering=tuple(tuple(g) for g in json.loads(r[3])), cannot_decide=bool(r[4]), created_at=r[5])
                for r in self._records("rankings", "x.ordering, x.cannot_decide", model_id, latest_only)]

    def rationales(self, model_id: str | None = None, latest_only: bool = True) -> list[Rationale]:
        return [Rationale(submission_id=r[0], task_id=r[1], annotator=r[2], tokens=tuple(json.loads(r[3])), created_at=r[4])
                for r in self._records("rationales", "x.tokens", model_id, latest_only)]

    def _records(self, table: str, columns: str, model_id: str | None, latest_only: bool) -> list[tuple]:
        where, params = [], []
        if model_id:
            where.append("t.model_id = ?")
            params.append(model_id)
        if latest_only:
            where.append(f"x.id = (SELECT MAX(y.id) FROM {table} y WHERE y.task_id = x.task_id "
                         "AND y.annotator_id = x.annotator_id)")
        sql = (f"SELECT x.submission_id, x.task_id, a.name, {columns}, x.created_at FROM {table} x "
               "JOIN annotators a ON a.id = x.annotator_id JOIN tasks t ON t.id = x.task_id "
               f"{'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY x.id")
        return self.query(sql, params)

    def counts(self) -> dict[str, int]:
        return {table: self.query(f"SELECT COUNT(*) FROM {table}")[0][0]
                for table in ("annotators", "tasks", "explanations", "rankings", "rationales")}

    def integrity_check(self) -> str:
        """SQLite's own check: 'ok' for a consistent file."""
        return "; ".join(r[0] for r in self.query("PRAGMA integrity_check"))
