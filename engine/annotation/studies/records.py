"""The records of a study (twelve frozen dataclasses: the design, the stored study, a link, a session, what an item
shows, an assignment, progress, an answer, the organiser's status, an attention-check item) and their JSON form in
the database."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from datetime import datetime

from engine.annotation.invitations import DEFAULT_BASE_URL, invitation_url
from engine.annotation.records import KINDS  # what a task asks: the store's two kinds of answer
from engine.annotation.studies.seats import seat_count
from engine.annotation.task_words import check_shown_as
from engine.annotation.text_fields import check_text
from engine.errors import InvalidInputError
from engine.plausibility.tasks import SLOTS, AnonymisedExplanation, Task

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


@dataclass(frozen=True)
class CheckItem:
    """An attention check: the task it shows, what counts as passing, and the note shown with it."""

    kind: str
    task: Task
    expected: dict
    note: str | None = None


def config_to_json(config: StudyConfig) -> str:
    return json.dumps(asdict(config), sort_keys=True, ensure_ascii=False)


def config_from_json(text: str) -> StudyConfig:
    data = json.loads(text)
    for key in ("measures", "kinds", "example_ids"):
        data[key] = tuple(data.get(key) or ())
    data.setdefault("shown_as", "token")  # stored before studies chose: they showed word pieces
    known = StudyConfig.__dataclass_fields__
    return StudyConfig(**{k: v for k, v in data.items() if k in known})


def task_to_json(task: Task) -> str:
    record = asdict(task)
    record["explanations"] = [asdict(e) for e in task.explanations]
    return json.dumps(record, sort_keys=True, ensure_ascii=False)


def task_from_json(text: str) -> Task:
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


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def seconds_between(start: str, end: str) -> float:
    return (parse_time(end) - parse_time(start)).total_seconds()
