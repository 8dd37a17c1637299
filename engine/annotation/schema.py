"""The annotation store's SQLite schema and its migrations: ordered steps, each in its own transaction, the
file's version in `PRAGMA user_version` and each applied step logged in `schema_history`. A file written by a
newer version is refused, not touched. Steps are only ever appended: existing files must keep opening."""
from __future__ import annotations

import sqlite3

from engine.annotation.records import utc_now
from engine.errors import AnnotationStoreError

# Append steps; never edit a step that has shipped. Step i brings the file to user_version i + 1.
MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("annotators, tasks with their explanations, rankings, rationales", """
        CREATE TABLE schema_history (
            version     INTEGER PRIMARY KEY,
            description TEXT NOT NULL,
            applied_at  TEXT NOT NULL
        );
        CREATE TABLE annotators (
            id         INTEGER PRIMARY KEY,
            name       TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL
        );
        CREATE TABLE tasks (
            id             TEXT PRIMARY KEY,
            model_id       TEXT NOT NULL,
            dataset        TEXT,
            example_uid    TEXT,
            primary_text   TEXT NOT NULL,
            auxiliary      TEXT,
            label          INTEGER,
            label_name     TEXT,
            target         INTEGER,
            target_name    TEXT,
            target_source  TEXT,
            tokens         TEXT NOT NULL,   -- JSON list of the maskable tokens shown
            gold_rationale TEXT,            -- JSON list of token indices (bAbI supporting facts) or NULL
            seed           INTEGER NOT NULL,
            code_version   TEXT,
            created_at     TEXT NOT NULL
        );
        CREATE TABLE explanations (
            task_id      TEXT NOT NULL REFERENCES tasks(id),
            slot         TEXT NOT NULL,     -- the anonymised name shown: A, B, C ...
            measure      TEXT NOT NULL,
            options      TEXT NOT NULL,     -- JSON
            target       INTEGER,
            target_source TEXT,
            code_version TEXT,
            scores       TEXT NOT NULL,     -- JSON list, one score per task token
            PRIMARY KEY (task_id, slot),
            UNIQUE (task_id, measure)
        );
        CREATE TABLE rankings (
            id            INTEGER PRIMARY KEY,
            submission_id TEXT NOT NULL UNIQUE,
            task_id       TEXT NOT NULL REFERENCES tasks(id),
            annotator_id  INTEGER NOT NULL REFERENCES annotators(id),
            ordering      TEXT NOT NULL,    -- JSON list of groups of slots, best first; a group is a tie
            cannot_decide INTEGER NOT NULL CHECK (cannot_decide IN (0, 1)),
            created_at    TEXT NOT NULL
        );
        CREATE TABLE rationales (
            id            INTEGER PRIMARY KEY,
            submission_id TEXT NOT NULL UNIQUE,
            task_id       TEXT NOT NULL REFERENCES tasks(id),
            annotator_id  INTEGER NOT NULL REFERENCES annotators(id),
            tokens        TEXT NOT NULL,    -- JSON sorted list of selected token indices
            created_at    TEXT NOT NULL
        );
    """),
    ("indexes for the next-task and per-model queries", """
        CREATE INDEX tasks_by_model ON tasks(model_id, created_at, id);
        CREATE INDEX rankings_by_task ON rankings(task_id, annotator_id);
        CREATE INDEX rationales_by_task ON rationales(task_id, annotator_id);
    """),
)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, upto: int = SCHEMA_VERSION) -> int:
    """Apply the missing steps (each in its own transaction) up to version `upto`; returns the version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise AnnotationStoreError(
            f"the annotation database has schema version {version}, newer than this code's {SCHEMA_VERSION}: "
            "update the code (the file was left untouched)")
    for step in range(version, upto):
        description, script = MIGRATIONS[step]
        conn.execute("BEGIN IMMEDIATE")
        try:
            # re-read under the write lock: another process may have migrated meanwhile
            if conn.execute("PRAGMA user_version").fetchone()[0] != step:
                conn.execute("ROLLBACK")
                continue
            for statement in sql_statements(script):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_history VALUES (?, ?, ?)", (step + 1, description, utc_now()))
            conn.execute(f"PRAGMA user_version = {step + 1}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return conn.execute("PRAGMA user_version").fetchone()[0]


def sql_statements(script: str) -> list[str]:
    # executescript() would commit our transaction; split on ';' (no ';' inside the DDL's text)
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
