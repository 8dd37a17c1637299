"""The study tables' SQLite schema and migrations, versioned apart from the annotation store's own
(`study_schema_history`): steps are only appended, so every existing database keeps opening."""
from __future__ import annotations

import sqlite3

from engine.annotation.records import utc_now
from engine.annotation.schema import sql_statements
from engine.errors import AnnotationStoreError

# Appended steps only; step i brings `study_schema_version` to i + 1. Kept apart from the store's own
# MIGRATIONS so the store's version and its tools are untouched by studies.
STUDY_MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("studies, items, invitations, participants, assignments, answers", """
        CREATE TABLE studies (
            id               TEXT PRIMARY KEY,
            config           TEXT NOT NULL,   -- JSON of StudyConfig
            state            TEXT NOT NULL CHECK (state IN ('open', 'closed')),
            completion_code  TEXT NOT NULL,
            created_at       TEXT NOT NULL,
            closed_at        TEXT,
            code_version     TEXT,
            command_line     TEXT
        );
        CREATE TABLE study_items (
            id          INTEGER PRIMARY KEY,
            study_id    TEXT NOT NULL REFERENCES studies(id),
            position    INTEGER NOT NULL,
            task_id     TEXT REFERENCES tasks(id),   -- a real task; NULL for an attention check
            check_kind  TEXT,                        -- NULL, 'instructed' or 'gold'
            check_task  TEXT,                        -- JSON of the Task an attention check shows
            expected    TEXT,                        -- JSON: {"first": slot} or {"tokens": [...]}
            note        TEXT,                        -- shown with the item (an instructed check's instruction)
            UNIQUE (study_id, position),
            CHECK ((task_id IS NULL) <> (check_kind IS NULL))
        );
        CREATE TABLE study_invitations (
            id           INTEGER PRIMARY KEY,
            study_id     TEXT NOT NULL REFERENCES studies(id),
            token_hash   TEXT NOT NULL UNIQUE,       -- sha256 hex of the token; the token itself is never stored
            kind         TEXT NOT NULL CHECK (kind IN ('personal', 'open')),
            label        TEXT,                       -- the annotator's name (personal links)
            single_use   INTEGER NOT NULL CHECK (single_use IN (0, 1)),
            redeemed_at  TEXT,
            revoked_at   TEXT,
            created_at   TEXT NOT NULL
        );
        CREATE TABLE study_participants (
            id               INTEGER PRIMARY KEY,
            study_id         TEXT NOT NULL REFERENCES studies(id),
            invitation_id    INTEGER NOT NULL REFERENCES study_invitations(id),
            label            TEXT NOT NULL,
            worker_id        TEXT,
            started_at       TEXT NOT NULL,
            finished_at      TEXT,
            released_at      TEXT,
            excluded         INTEGER NOT NULL DEFAULT 0 CHECK (excluded IN (0, 1)),
            exclusion_reason TEXT,
            consented_at     TEXT,                   -- when they accepted the consent text (record_consent)
            seat             INTEGER,                -- the share of tasks they hold (see `seat_positions`)
            UNIQUE (study_id, label)
        );
        CREATE TABLE study_assignments (
            id             INTEGER PRIMARY KEY,
            study_id       TEXT NOT NULL REFERENCES studies(id),
            participant_id INTEGER NOT NULL REFERENCES study_participants(id),
            item_id        INTEGER NOT NULL REFERENCES study_items(id),
            seat           INTEGER,                  -- the seat a real task was given under; NULL for a check
            sequence       INTEGER NOT NULL,
            assigned_at    TEXT NOT NULL,
            released_at    TEXT,                     -- given back to the pool unanswered
            UNIQUE (participant_id, item_id),
            UNIQUE (participant_id, sequence)
        );
        CREATE TABLE study_answers (
            id             INTEGER PRIMARY KEY,
            submission_id  TEXT NOT NULL UNIQUE,
            assignment_id  INTEGER NOT NULL UNIQUE REFERENCES study_assignments(id),
            ordering       TEXT,                     -- JSON groups of slots, best first
            cannot_decide  INTEGER NOT NULL DEFAULT 0 CHECK (cannot_decide IN (0, 1)),
            rationale      TEXT,                     -- JSON sorted token indices
            comment        TEXT,
            passed         INTEGER,                  -- attention checks: 1 passed, 0 failed
            created_at     TEXT NOT NULL
        );
        CREATE INDEX study_items_by_study ON study_items(study_id, position);
        CREATE INDEX study_assignments_by_item ON study_assignments(item_id, released_at);
        CREATE INDEX study_assignments_by_participant ON study_assignments(participant_id, sequence);
        CREATE INDEX study_participants_by_worker ON study_participants(study_id, worker_id);
        CREATE INDEX study_participants_by_seat ON study_participants(study_id, seat);
    """),
)
STUDY_SCHEMA_VERSION = len(STUDY_MIGRATIONS)


def migrate_studies(conn: sqlite3.Connection) -> int:
    """Bring the study tables to `STUDY_SCHEMA_VERSION` (each step in its own transaction); returns it."""
    conn.execute("CREATE TABLE IF NOT EXISTS study_schema_history (version INTEGER PRIMARY KEY, "
                 "description TEXT NOT NULL, applied_at TEXT NOT NULL)")
    version = conn.execute("SELECT COALESCE(MAX(version), 0) FROM study_schema_history").fetchone()[0]
    if version > STUDY_SCHEMA_VERSION:
        raise AnnotationStoreError(f"the study tables have schema version {version}, newer than this code's "
                                   f"{STUDY_SCHEMA_VERSION}: update the code (the file was left untouched)")
    for step in range(version, STUDY_SCHEMA_VERSION):
        description, script = STUDY_MIGRATIONS[step]
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT COALESCE(MAX(version), 0) FROM study_schema_history").fetchone()[0] != step:
                conn.execute("ROLLBACK")  # another process migrated meanwhile
                continue
            for statement in sql_statements(script):
                conn.execute(statement)
            conn.execute("INSERT INTO study_schema_history VALUES (?, ?, ?)", (step + 1, description, utc_now()))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return STUDY_SCHEMA_VERSION
