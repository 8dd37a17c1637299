"""Plausibility studies: many annotators, invited, each given their own tasks, every task answered by
exactly `overlap` of them, with attention checks and the answers kept through any crash.

The study lives in the annotation store's SQLite file (its tables are added next to the store's own, with
their own versioned migrations, `STUDY_MIGRATIONS`); the tasks it shows are ordinary store tasks
(`tasks.py`), so a study's task can also be ranked on the Annotate page. Answers go to the study's own
`study_answers` table: a study annotator is not one of the store's free-form annotators.

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
import math
import random
import secrets
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from engine.errors import EngineError, InvalidInputError, UnknownNameError
from engine.plausibility.invitations import (
    DEFAULT_BASE_URL,
    hash_token,
    invitation_url,
    new_completion_code,
    new_token,
    token_matches,
)
from engine.plausibility.store import (
    AnnotationStore,
    Ranking,
    Rationale,
    check_annotator_name,
    new_submission_id,
    normalise_ordering,
    utc_now,
)
from engine.plausibility.task_words import check_shown_as, task_words
from engine.plausibility.tasks import SLOTS, AnonymisedExplanation, Task
from engine.plausibility.text_fields import check_text

KINDS = ("ranking", "rationale")
CHECK_KINDS = ("instructed", "gold")
STATES = ("open", "closed")
DEFAULT_WORKER_PARAM = "PROLIFIC_PID"
MAX_TEXT_LENGTH = 20_000  # instructions, consent
MAX_COMMENT_LENGTH = 5_000

DEFAULT_INSTRUCTIONS = (
    "Each task shows a text and several explanations of a classifier's decision about it, each as "
    "highlighted words (stronger colour = more important to the decision). Rank the explanations from the "
    "most to the least convincing: the best explanation highlights the words that a person would use to "
    "justify the decision. Explanations may tie. If you cannot tell them apart, choose 'cannot decide'.")
DEFAULT_CONSENT = (
    "This study collects your judgements of explanations for research. Your answers are stored with the "
    "name or id you were invited under and nothing else about you. You can stop at any time.")


# -- errors -----------------------------------------------------------------------------------------
class StudyError(EngineError):
    """A study operation refused (nothing was written and no study data is returned)."""


class UnknownStudyError(StudyError, UnknownNameError):
    """No study by that id; the message lists the existing ones."""


class InvitationError(StudyError):
    """A link that does not admit its holder."""


class UnknownTokenError(InvitationError):
    """A token that matches no invitation (mistyped, truncated or made up)."""


class TokenUsedError(InvitationError):
    """A single-use link opened a second time, or a revoked link."""


class StudyClosedError(InvitationError):
    """The study is closed: no new sessions, tasks or answers."""


class StudyFullError(StudyError):
    """Every place (seat) in the study is taken by an active annotator; a place frees up if one is released."""


class StudyTimeUpError(StudyError):
    """The annotator's time limit has passed (their unanswered tasks went back to the pool)."""


class ParticipantReleasedError(StudyError):
    """The organiser released this annotator from the study (their unanswered tasks went back to the pool)."""


# -- dataclasses ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StudyConfig:
    """What a study is: everything `create` needs besides the tasks.

    name: shown to annotators as the study's title (stored verbatim).
    model_id, dataset, split: where the tasks come from (dataset None: the model's own dataset).
    n_examples / example_ids: the first `n_examples` of the split, or these example uids (one task each).
    measures: the importance measures whose explanations are compared (2+ for rankings).
    kinds: what each task asks: ("ranking",), ("rationale",) or both.
    tasks_per_annotator: real tasks one annotator gets (attention checks come on top).
    overlap: annotators per task; the study needs ceil(tasks * overlap / tasks_per_annotator) annotators.
    attention_checks: check items per annotator, placed at random positions among their tasks.
    check_kind: 'instructed' (the item says which explanation to put first) or 'gold' (the gold rationale
        against a random one of the same size; needs a dataset with rationales, e.g. bAbI).
    instructions, consent: text shown before the first task (verbatim; escaped on display).
    time_limit_minutes: per annotator from their first visit; None = no limit.
    worker_param: the URL parameter carrying a crowd worker's id on the open link.
    completion_code: shown on the done page of the open link (None: one is made).
    shown_as: what annotators see of each task: 'word' (the words as typed, each scored by the sum of its pieces;
        rationales mark whole words) or 'token' (the model's word pieces, `me ##hta`). Studies stored before this
        field existed showed pieces and read back as 'token'.
    """

    name: str
    model_id: str
    measures: tuple[str, ...]
    dataset: str | None = None
    split: str = "test"
    n_examples: int | None = 10
    example_ids: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ("ranking",)
    tasks_per_annotator: int = 10
    overlap: int = 2
    attention_checks: int = 1
    check_kind: str = "instructed"
    instructions: str = DEFAULT_INSTRUCTIONS
    consent: str = DEFAULT_CONSENT
    time_limit_minutes: float | None = None
    worker_param: str = DEFAULT_WORKER_PARAM
    completion_code: str | None = None
    shown_as: str = "word"

    def checked(self) -> StudyConfig:
        """This config with tuples normalised, or InvalidInputError naming the first bad field."""
        c = replace(self, measures=tuple(self.measures), kinds=tuple(self.kinds), example_ids=tuple(self.example_ids))
        if not isinstance(c.name, str) or not c.name.strip() or len(c.name) > 200:
            raise InvalidInputError("a study needs a name of 1 to 200 characters")
        check_text(c.name, "the study name")
        if not c.kinds or any(k not in KINDS for k in c.kinds) or len(set(c.kinds)) != len(c.kinds):
            raise InvalidInputError(f"kinds must be one or both of {', '.join(KINDS)}; got {list(c.kinds)}")
        if len(set(c.measures)) != len(c.measures) or not c.measures:
            raise InvalidInputError(f"measures must be distinct and non-empty; got {list(c.measures)}")
        if "ranking" in c.kinds and len(c.measures) < 2:
            raise InvalidInputError("a ranking study compares explanations: give at least two measures")
        if len(c.measures) > len(SLOTS):
            raise InvalidInputError(f"at most {len(SLOTS)} measures fit one task")
        for name, value, low in (("tasks_per_annotator", c.tasks_per_annotator, 1), ("overlap", c.overlap, 1),
                                 ("attention_checks", c.attention_checks, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise InvalidInputError(f"{name} must be a whole number >= {low}; got {value!r}")
        if c.example_ids:
            if len(set(c.example_ids)) != len(c.example_ids):
                raise InvalidInputError("example_ids has duplicates")
        elif not isinstance(c.n_examples, int) or c.n_examples < 1:
            raise InvalidInputError(f"n_examples must be >= 1 (or give example_ids); got {c.n_examples!r}")
        if c.check_kind not in CHECK_KINDS:
            raise InvalidInputError(f"check_kind must be one of {', '.join(CHECK_KINDS)}; got {c.check_kind!r}")
        if c.time_limit_minutes is not None and not (c.time_limit_minutes > 0 and math.isfinite(c.time_limit_minutes)):
            raise InvalidInputError(f"time_limit_minutes must be a positive number or None; got {c.time_limit_minutes!r}")
        for name in ("instructions", "consent"):
            text = getattr(c, name)
            if not isinstance(text, str) or len(text) > MAX_TEXT_LENGTH:
                raise InvalidInputError(f"{name} must be text of at most {MAX_TEXT_LENGTH} characters")
            check_text(text, f"the {name}", multiline=True)
        if not c.worker_param or not c.worker_param.replace("_", "").isalnum():
            raise InvalidInputError(f"worker_param must be a URL parameter name (letters, digits, _); got {c.worker_param!r}")
        if c.completion_code is not None and not (1 <= len(c.completion_code) <= 64):
            raise InvalidInputError("completion_code must be 1 to 64 characters")
        if c.completion_code is not None:
            check_text(c.completion_code, "the completion code")
        check_shown_as(c.shown_as)
        return c


@dataclass(frozen=True)
class Study:
    """A stored study: its config, id, state ('open' or 'closed') and provenance.

    n_tasks: real tasks (examples); n_checks: distinct attention-check items made.
    code_version, command_line, created_at: provenance, copied into every export.
    completion_code: for the organiser (and the done page); never needed to annotate.
    """

    id: str
    config: StudyConfig
    state: str
    n_tasks: int
    n_checks: int
    created_at: str
    closed_at: str | None
    code_version: str | None
    command_line: str | None
    completion_code: str
    has_open_link: bool

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def annotators_needed(self) -> int:
        """Annotators (seats) needed to give every task its overlap: ceil(tasks * overlap / tasks_per_annotator)."""
        return seat_count(self.n_tasks, self.config.overlap, self.config.tasks_per_annotator)

    @property
    def items_per_annotator(self) -> int:
        """Real tasks plus attention checks one annotator is given (at most)."""
        return min(self.config.tasks_per_annotator, self.n_tasks) + self.config.attention_checks


@dataclass(frozen=True)
class IssuedInvitation:
    """A freshly made link. `token` is the raw secret: it is returned here once and never stored.

    kind: 'personal' (one named annotator) or 'open' (any crowd worker; their id comes from the URL).
    """

    study_id: str
    label: str
    token: str
    kind: str
    single_use: bool
    worker_param: str | None = None

    def url(self, base_url: str = DEFAULT_BASE_URL) -> str:
        """The link to send (the open link carries the platform's worker-id placeholder)."""
        return invitation_url(self.token, base_url, self.worker_param if self.kind == "open" else None)


@dataclass(frozen=True)
class Session:
    """An annotator admitted to a study (what the dashboard keeps in the browser session).

    participant_id: their row; label: their name or crowd worker id (verbatim).
    title, instructions, consent, kinds: what the annotator's view shows (no model, dataset or measure names).
    deadline: ISO time after which they get no more tasks (None: no limit).
    total: items they will be given at most (tasks + attention checks).
    shown_as: 'word' or 'token', the study's choice of what each task shows (StudyConfig.shown_as).
    """

    study_id: str
    participant_id: int
    label: str
    worker_id: str | None
    title: str
    instructions: str
    consent: str
    kinds: tuple[str, ...]
    started_at: str
    deadline: str | None
    total: int
    shown_as: str = "word"


@dataclass(frozen=True)
class SlotScores:
    """One anonymised explanation as the annotator sees it: a slot letter and a score per token."""

    slot: str
    scores: tuple[float, ...]


@dataclass(frozen=True)
class AnnotatorTask:
    """What one item shows: the input, its tokens, the class explained, the anonymised explanations.
    Nothing here names the model, dataset, measures or files."""

    primary: str
    auxiliary: str | None
    tokens: tuple[str, ...]
    class_name: str | None
    explanations: tuple[SlotScores, ...]

    @property
    def slots(self) -> tuple[str, ...]:
        return tuple(e.slot for e in self.explanations)


@dataclass(frozen=True)
class Assignment:
    """One item given to an annotator. sequence: 1-based position in their list; total: their list's
    length (at most); note: an extra line for this item (an instructed attention check says what to do)."""

    assignment_id: int
    sequence: int
    total: int
    kinds: tuple[str, ...]
    task: AnnotatorTask
    note: str | None = None


@dataclass(frozen=True)
class Progress:
    """An annotator's progress: answered of total; finished with the completion code once done."""

    answered: int
    total: int
    finished: bool
    completion_code: str | None = None


@dataclass(frozen=True)
class StudyAnswer:
    """One stored answer with what results and quality need (organiser side).

    task_id: the store task (None for an attention check); check_kind: None for a real task.
    ordering: groups of slots best first ((), with cannot_decide or in a rationale-only study).
    rationale: marked token indices (None in a ranking-only study). passed: check result (None: not a check).
    seconds: from the item being given to the answer being stored (server clock).
    """

    submission_id: str
    assignment_id: int
    item_id: int
    task_id: str | None
    check_kind: str | None
    participant_id: int
    annotator: str
    ordering: tuple[tuple[str, ...], ...]
    cannot_decide: bool
    rationale: tuple[int, ...] | None
    comment: str | None
    passed: bool | None
    assigned_at: str
    created_at: str
    seconds: float


@dataclass(frozen=True)
class ParticipantStatus:
    """One annotator's row in the organiser's status: answered / assigned items, checks failed, times."""

    participant_id: int
    label: str
    worker_id: str | None
    invitation: str
    started_at: str
    finished_at: str | None
    assigned: int
    answered: int
    pending: int
    checks_answered: int
    checks_failed: int
    excluded: bool
    exclusion_reason: str | None
    released: bool
    consented_at: str | None = None


@dataclass(frozen=True)
class StudyStatus:
    """The organiser's overview. coverage: task_id -> answers so far (real tasks only);
    complete: tasks with exactly `overlap` answers; over: tasks with more (should stay 0)."""

    study: Study
    participants: tuple[ParticipantStatus, ...]
    coverage: dict[str, int]
    assigned: dict[str, int]
    invitations: int
    complete: int
    over: int
    answers: int

    @property
    def remaining_slots(self) -> int:
        """Answers still needed for every task to reach its overlap."""
        return sum(max(0, self.study.config.overlap - n) for n in self.coverage.values())


# -- schema -------------------------------------------------------------------------------------------
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
    from engine.plausibility.store import AnnotationStoreError, _statements

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
            for statement in _statements(script):
                conn.execute(statement)
            conn.execute("INSERT INTO study_schema_history VALUES (?, ?, ?)", (step + 1, description, utc_now()))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return STUDY_SCHEMA_VERSION


# -- helpers ------------------------------------------------------------------------------------------
def _config_json(config: StudyConfig) -> str:
    return json.dumps(asdict(config), sort_keys=True, ensure_ascii=False)


def _config_from_json(text: str) -> StudyConfig:
    data = json.loads(text)
    for key in ("measures", "kinds", "example_ids"):
        data[key] = tuple(data.get(key) or ())
    data.setdefault("shown_as", "token")  # stored before studies chose: they showed word pieces
    known = StudyConfig.__dataclass_fields__
    return StudyConfig(**{k: v for k, v in data.items() if k in known})


def _task_json(task: Task) -> str:
    record = asdict(task)
    record["explanations"] = [asdict(e) for e in task.explanations]
    return json.dumps(record, sort_keys=True, ensure_ascii=False)


def _task_from_json(text: str) -> Task:
    data = json.loads(text)
    for key in ("tokens", "gold_rationale"):
        if data.get(key) is not None:
            data[key] = tuple(data[key])
    data["explanations"] = tuple(AnonymisedExplanation(**{**e, "scores": tuple(e["scores"])}) for e in data["explanations"])
    return Task(**data)


def annotator_task(task: Task) -> AnnotatorTask:
    """The annotator's view of a task: input, tokens, class explained, slot scores; no model or measures."""
    return AnnotatorTask(primary=task.primary, auxiliary=task.auxiliary, tokens=tuple(task.tokens),
                         class_name=task.target_name,
                         explanations=tuple(SlotScores(e.slot, tuple(e.scores)) for e in task.explanations))


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _seconds_between(start: str, end: str) -> float:
    return (_parse_time(end) - _parse_time(start)).total_seconds()


def check_positions(participant_id: int, n_tasks: int, n_checks: int) -> frozenset[int]:
    """The 1-based sequence numbers at which this participant gets attention checks: random but fixed per
    participant, never first (the first task teaches the interface) when there is room."""
    total = n_tasks + n_checks
    candidates = list(range(2, total + 1)) if total - 1 >= n_checks else list(range(1, total + 1))
    return frozenset(random.Random(f"checks:{participant_id}").sample(candidates, n_checks))


def seat_count(n_tasks: int, overlap: int, tasks_per_annotator: int) -> int:
    """How many annotators' shares (seats) the study has: ceil(n_tasks * overlap / min(tasks_per_annotator, n_tasks))."""
    return math.ceil(n_tasks * overlap / min(tasks_per_annotator, n_tasks)) if n_tasks else 0


def seat_positions(seat: int, n_tasks: int, overlap: int, tasks_per_annotator: int) -> list[int]:
    """The task positions (0-based) of one seat.

    Why seats: handing out "any task still short of its overlap" greedily can strand the last slots of a task
    with annotators who have all seen it already, so some task ends one answer short. Instead the n_tasks *
    overlap answer slots are laid out as the task positions repeated `overlap` times (slot s is task
    s mod n_tasks) and cut into consecutive seats of `tasks_per_annotator` slots. Every task then appears in
    exactly `overlap` seats, and a seat never holds a task twice (its slots are consecutive and at most
    n_tasks long). An annotator claims one free seat when they arrive; a released seat's unanswered tasks go
    to the next annotator who arrives, who cannot have seen them (they hold no other seat)."""
    per = min(tasks_per_annotator, n_tasks)
    return [s % n_tasks for s in range(seat * per, min((seat + 1) * per, n_tasks * overlap))]


# -- attention-check items -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CheckItem:
    """An attention check: the task it shows, what counts as passing, and the note shown with it."""

    kind: str
    task: Task
    expected: dict
    note: str | None = None


def make_checks(tasks: Sequence[Task], config: StudyConfig, n: int, seed: int = 0) -> list[CheckItem]:
    """`n` attention-check items built from the study's tasks.

    instructed: a copy of a real task with a note naming the explanation to put first (ranking) or the one
        word to mark (rationale-only studies).
    gold: the task's gold rationale as one explanation against a random set of as many tokens (ranking:
        the gold one must come first; rationale-only: the marks must overlap the gold rationale with F1 >= 0.5).
    Raises InvalidInputError when 'gold' is asked for tasks without gold rationales.
    """
    rng = random.Random(f"checks:{seed}")
    if n == 0:
        return []
    if config.check_kind == "gold":
        pool = [t for t in tasks if t.gold_rationale and len(t.gold_rationale) < len(t.tokens)]
        if not pool:
            raise InvalidInputError("check_kind 'gold' needs examples with gold rationales (e.g. a bAbI dataset or a "
                                    "data file with rationales); none of the study's examples has one: use 'instructed'")
    else:
        pool = [t for t in tasks if len(t.tokens) >= 1 and ("ranking" not in config.kinds or len(t.explanations) >= 2)]
        if not pool:
            raise InvalidInputError("no task can carry an instructed attention check (each needs tokens and 2+ explanations)")
    checks = []
    for i in range(n):
        # bases spread over the task list, so that most annotators' seats (runs of consecutive tasks) miss some
        base = pool[(i * len(pool)) // n if n <= len(pool) else i % len(pool)]
        if config.check_kind == "instructed":
            if "ranking" in config.kinds:
                slot = rng.choice(base.slots)
                note = (f"Attention check: for this task only, put explanation {slot} first, whatever you think of it, "
                        "and rank the others as you like.")
                expected = {"first": slot}
            elif config.shown_as == "word":  # the word as shown; marking it marks all of its pieces
                words = task_words(base.primary, base.tokens)
                index = rng.randrange(len(words))
                note = (f"Attention check: for this task only, mark only word number {index + 1} "
                        f"(\u201c{words[index].text}\u201d) and nothing else.")
                expected = {"tokens": list(words[index].tokens)}
            else:
                index = rng.randrange(len(base.tokens))
                note = (f"Attention check: for this task only, mark only word number {index + 1} "
                        f"(\u201c{base.tokens[index]}\u201d) and nothing else.")
                expected = {"tokens": [index]}
            checks.append(CheckItem("instructed", replace(base, created_at=None), expected, note))
        else:
            gold = sorted(base.gold_rationale)
            others = [j for j in range(len(base.tokens)) if j not in set(gold)]
            decoy = sorted(rng.sample(others, min(len(gold), len(others))))
            slots = ["A", "B"]
            rng.shuffle(slots)
            scores = {"gold": [1.0 if j in set(gold) else 0.0 for j in range(len(base.tokens))],
                      "random": [1.0 if j in set(decoy) else 0.0 for j in range(len(base.tokens))]}
            explanations = tuple(sorted((AnonymisedExplanation(slot=slot, measure=f"attention-check:{m}", scores=tuple(scores[m]))
                                         for slot, m in zip(slots, ("gold", "random"))), key=lambda e: e.slot))
            task = replace(base, explanations=explanations, created_at=None)
            expected = {"first": slots[0]} if "ranking" in config.kinds else {"tokens": gold, "min_f1": 0.5}
            checks.append(CheckItem("gold", task, expected, None))
    return checks


def check_passed(expected: dict, ordering: Sequence[Sequence[str]], cannot_decide: bool,
                 rationale: Sequence[int] | None) -> bool:
    """Whether an answer passes a check. {"first": slot}: that slot alone in the first group (a tie or
    'cannot decide' fails). {"tokens": [...]} : exactly these tokens marked, or with "min_f1", token F1 >= it."""
    if "first" in expected:
        return not cannot_decide and bool(ordering) and tuple(ordering[0]) == (expected["first"],)
    marked = set(rationale or ())
    want = set(expected["tokens"])
    if "min_f1" not in expected:
        return marked == want
    overlap = len(marked & want)
    if overlap == 0:
        return False
    precision, recall = overlap / len(marked), overlap / len(want)
    return 2 * precision * recall / (precision + recall) >= expected["min_f1"]


# -- building the tasks of a study -----------------------------------------------------------------------
def study_examples(config: StudyConfig, dataset) -> list:
    """The dataset `Example`s a study uses: `example_ids` in that order, or the split's first `n_examples`."""
    examples = dataset.split(config.split)
    if config.example_ids:
        by_uid = {e.uid: e for e in examples}
        missing = [uid for uid in config.example_ids if uid not in by_uid]
        if missing:
            raise InvalidInputError(f"example ids not in {dataset.name}/{config.split}: {missing[:5]}"
                                    f"{' ...' if len(missing) > 5 else ''} (ids look like {examples[0].uid!r})")
        return [by_uid[uid] for uid in config.example_ids]
    if config.n_examples > len(examples):
        raise InvalidInputError(f"{dataset.name}/{config.split} has {len(examples)} examples; asked for {config.n_examples}")
    return list(examples[: config.n_examples])


def build_study_tasks(config: StudyConfig, classifier=None, progress=None) -> list[Task]:
    """Explain the study's examples with each measure (the model's predicted class) and make one task each.
    `classifier`: an already loaded one (default: load `config.model_id`)."""
    from engine.data import get_dataset
    from engine.importance.registry import measure_availability
    from engine.plausibility.tasks import build_tasks

    config = config.checked()
    if classifier is None:
        from engine.models import load_classifier

        classifier = load_classifier(config.model_id)
    availability = measure_availability(classifier)
    bad = {m: availability.get(m, "not a known measure") for m in config.measures if availability.get(m, "unknown")}
    if bad:
        usable = sorted(m for m, why in availability.items() if not why)
        raise InvalidInputError("measures this model cannot use: " + "; ".join(f"{m} ({why})" for m, why in bad.items())
                                + f". Usable: {', '.join(usable)}")
    meta = classifier.metadata
    dataset = get_dataset(config.dataset or meta["dataset"], meta.get("split_seed", 0))
    return build_tasks(classifier, study_examples(config, dataset), list(config.measures), progress=progress)


# -- the study store ------------------------------------------------------------------------------------
class StudyStore:
    """Studies in the annotation database at `path` (default: the store's default), their tables
    created and migrated on open. Every method is one short transaction; safe across threads and
    processes (make one StudyStore per process or share one: it holds no connection)."""

    def __init__(self, path: str | Path | AnnotationStore | None = None, *, busy_timeout: float = 30.0):
        self.annotations = path if isinstance(path, AnnotationStore) else AnnotationStore(path, busy_timeout=busy_timeout)
        self.path = self.annotations.path
        self._tasks: dict[str, Task] = {}  # tasks never change once stored (INSERT OR IGNORE), so caching is safe
        with self.annotations._connect() as conn:
            migrate_studies(conn)

    def __repr__(self) -> str:
        return f"StudyStore({str(self.path)!r})"

    def _tx(self):
        return self.annotations.transaction()

    def _read(self, sql: str, params: Sequence = ()) -> list[tuple]:
        return self.annotations._read(sql, params)

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
                self.annotations._insert_task(conn, task)
            conn.execute("INSERT INTO studies VALUES (?,?,?,?,?,?,?,?)",
                         (study_id, _config_json(config), "open", code, utc_now(), None, code_version, command_line))
            for position, task in enumerate(tasks):
                conn.execute("INSERT INTO study_items (study_id, position, task_id) VALUES (?,?,?)",
                             (study_id, position, task.id))
            for offset, check in enumerate(checks):
                conn.execute("INSERT INTO study_items (study_id, position, check_kind, check_task, expected, note) "
                             "VALUES (?,?,?,?,?,?)", (study_id, len(tasks) + offset, check.kind, _task_json(check.task),
                                                      json.dumps(check.expected), check.note))
        return self.study(study_id)

    def study(self, study_id: str) -> Study:
        """The study with this id, or UnknownStudyError listing the ids there are."""
        with self.annotations._connect() as conn:
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
        return Study(id=row[0], config=_config_from_json(row[1]), state=row[2], n_tasks=n_tasks, n_checks=n_checks,
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

    def _session(self, conn, study: Study, participant_id: int) -> Session:
        label, worker_id, started_at = conn.execute(
            "SELECT label, worker_id, started_at FROM study_participants WHERE id = ?", (participant_id,)).fetchone()
        c = study.config
        deadline = None
        if c.time_limit_minutes is not None:
            deadline = (_parse_time(started_at) + timedelta(minutes=c.time_limit_minutes)).isoformat(timespec="microseconds")
        return Session(study_id=study.id, participant_id=participant_id, label=label, worker_id=worker_id, title=c.name,
                       instructions=c.instructions, consent=c.consent, kinds=c.kinds, started_at=started_at,
                       deadline=deadline, total=self._total(conn, study, participant_id), shown_as=c.shown_as)

    def record_consent(self, session: Session) -> str:
        """Record that the annotator accepted the consent text (the first time only); returns that time.
        Exported with the participant; the engine does not enforce it (the annotator's page asks first)."""
        with self._tx() as conn:
            self._admit(conn, session)
            conn.execute("UPDATE study_participants SET consented_at = COALESCE(consented_at, ?) WHERE id = ?",
                         (utc_now(), session.participant_id))
            return conn.execute("SELECT consented_at FROM study_participants WHERE id = ?", (session.participant_id,)).fetchone()[0]

    def consented(self, session: Session) -> bool:
        """Whether this annotator has accepted the consent text (so a resumed session can skip it)."""
        return self._read("SELECT consented_at IS NOT NULL FROM study_participants WHERE id = ?",
                          (session.participant_id,))[0][0] == 1

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
            if _parse_time(started) + limit < _parse_time(now):
                self._release(conn, pid, now)

    # -- annotator: tasks and answers ----------------------------------------------------------------
    def next_assignment(self, session: Session) -> Assignment | None:
        """The annotator's current item: an unanswered one they were given (resume), else a new one taken
        atomically (a real task with fewer than `overlap` holders that they have not had, least-covered
        first; or an attention check at their check positions). None when they are done (the finish time is
        recorded). Raises StudyClosedError, StudyTimeUpError (their unanswered item goes back to the pool),
        ParticipantReleasedError."""
        timed_out = False
        with self._tx() as conn:
            study = self._admit(conn, session)
            now = utc_now()
            if self._time_up(session, now):
                self._release(conn, session.participant_id, now)
                timed_out = True
            else:
                self._release_expired(conn, study, now)
                assignment = self._next(conn, study, session, now)
        if timed_out:  # raised after the commit: the release must stick
            raise StudyTimeUpError("your time for this study is up; your answers so far are kept. Thank you")
        return assignment

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

    @staticmethod
    def _total(conn, study: Study, pid: int) -> int:
        """Items this participant gets at most: their seat's tasks (the last seat may be shorter) plus the checks."""
        seat = conn.execute("SELECT seat FROM study_participants WHERE id = ?", (pid,)).fetchone()[0]
        c = study.config
        real = len(seat_positions(seat, study.n_tasks, c.overlap, c.tasks_per_annotator)) if seat is not None else 0
        return real + c.attention_checks

    def _assignment(self, conn, study: Study, assignment_id: int) -> Assignment:
        sequence, task_id, check_task, note = conn.execute(
            "SELECT a.sequence, i.task_id, i.check_task, i.note FROM study_assignments a JOIN study_items i ON i.id = a.item_id "
            "WHERE a.id = ?", (assignment_id,)).fetchone()
        task = _task_from_json(check_task) if task_id is None else self._task(conn, task_id)
        pid = conn.execute("SELECT participant_id FROM study_assignments WHERE id = ?", (assignment_id,)).fetchone()[0]
        return Assignment(assignment_id=assignment_id, sequence=sequence, total=self._total(conn, study, pid),
                          kinds=study.config.kinds, task=annotator_task(task), note=note)

    def _task(self, conn, task_id: str) -> Task:
        # read through the store's own connection (WAL readers do not wait for our write lock); stored tasks are
        # immutable, so one read per task and StudyStore is enough
        task = self._tasks.get(task_id)
        if task is None:
            task = self._tasks[task_id] = self.annotations.task(task_id)
        return task

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
        timed_out = False
        with self._tx() as conn:
            study = self._admit(conn, session)
            now = utc_now()
            if self._time_up(session, now):
                self._release(conn, session.participant_id, now)
                timed_out = True
            else:
                stored = self._store_answer(conn, study, session, assignment_id, groups, bool(cannot_decide), marks,
                                            comment, submission_id, now)
        if timed_out:
            raise StudyTimeUpError("your time for this study is up: this last answer could not be kept; "
                                   "your earlier answers are. Thank you")
        return stored

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
        task = _task_from_json(row[3]) if row[2] is None else self._task(conn, row[2])
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

    def progress(self, session: Session) -> Progress:
        """Answered items of the annotator's total; `finished` (with the completion code) once they have no
        more items (`next_assignment` returned None)."""
        with self.annotations._connect() as conn:
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
        with self.annotations._connect() as conn:
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
                            created_at=r[13], seconds=_seconds_between(r[12], r[13])) for r in rows]

    def tasks(self, study_id: str) -> dict[str, Task]:
        """The study's real tasks by id (with measure names: organiser side only)."""
        ids = [r[0] for r in self._read("SELECT task_id FROM study_items WHERE study_id = ? AND task_id IS NOT NULL "
                                        "ORDER BY position", (self.study(study_id).id,))]
        return {tid: self._task(None, tid) for tid in ids}

    def check_items(self, study_id: str) -> list[CheckItem]:
        """The study's attention-check items (organiser side)."""
        return [CheckItem(kind=r[0], task=_task_from_json(r[1]), expected=json.loads(r[2]), note=r[3])
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

    def set_excluded(self, study_id: str, label: str, excluded: bool = True, reason: str | None = None) -> None:
        """Mark an annotator excluded from (or back into) the results; their answers stay stored."""
        with self._tx() as conn:
            self._study(conn, study_id)
            cur = conn.execute("UPDATE study_participants SET excluded = ?, exclusion_reason = ? WHERE study_id = ? AND label = ?",
                               (int(excluded), reason if excluded else None, study_id, label))
            if not cur.rowcount:
                known = [r[0] for r in conn.execute("SELECT label FROM study_participants WHERE study_id = ?", (study_id,))]
                raise UnknownNameError(f"no annotator {label!r} in {study_id!r}; annotators: {known[:20]}")

    def excluded(self, study_id: str) -> list[str]:
        """Labels of the annotators marked excluded."""
        return [r[0] for r in self._read("SELECT label FROM study_participants WHERE study_id = ? AND excluded = 1 "
                                         "ORDER BY id", (self.study(study_id).id,))]

    def release(self, study_id: str, label: str) -> None:
        """End an annotator's part (e.g. a no-show): their unanswered items go back to the pool for others."""
        with self._tx() as conn:
            self._study(conn, study_id)
            row = conn.execute("SELECT id FROM study_participants WHERE study_id = ? AND label = ?", (study_id, label)).fetchone()
            if row is None:
                raise UnknownNameError(f"no annotator {label!r} in {study_id!r}")
            self._release(conn, row[0], utc_now())

    def participant_labels(self, study_id: str) -> list[str]:
        return [r[0] for r in self._read("SELECT label FROM study_participants WHERE study_id = ? ORDER BY id",
                                         (self.study(study_id).id,))]

    def raw_tables(self) -> dict[str, int]:
        """Rows per study table (diagnostics and tests)."""
        return {t: self._read(f"SELECT COUNT(*) FROM {t}")[0][0] for t in
                ("studies", "study_items", "study_invitations", "study_participants", "study_assignments", "study_answers")}


__all__ = [
    "CHECK_KINDS", "KINDS", "STATES", "DEFAULT_WORKER_PARAM", "STUDY_SCHEMA_VERSION",
    "StudyError", "UnknownStudyError", "InvitationError", "UnknownTokenError", "TokenUsedError", "StudyClosedError",
    "StudyTimeUpError", "ParticipantReleasedError", "StudyFullError", "seat_count", "seat_positions",
    "StudyConfig", "Study", "IssuedInvitation", "Session", "SlotScores", "AnnotatorTask", "Assignment", "Progress",
    "StudyAnswer", "ParticipantStatus", "StudyStatus", "CheckItem",
    "StudyStore", "build_study_tasks", "study_examples", "make_checks", "check_passed", "check_positions", "annotator_task",
]
